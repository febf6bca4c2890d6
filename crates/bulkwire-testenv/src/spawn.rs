//! Starting servers that die with the test process.
//!
//! Linux's parent-death signal (`PR_SET_PDEATHSIG`) fires when the *thread* that forked the
//! child exits, not the process. The test harness runs each test on its own thread, so a server
//! started lazily by the first test to need it would be killed as soon as that test returned,
//! under the feet of the tests still using it. Every child is therefore forked by one spawner
//! thread that lives as long as the process; the signal then fires only when the whole test
//! process is gone (a normal exit, a panic, or a SIGKILL from a timeout).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use rustix::io::Errno;
use rustix::process::Signal;
use rustix::process::{getppid, set_parent_process_death_signal, Pid};

type Job = (Command, Sender<io::Result<Child>>);

/// Spawns `cmd` from the process-long spawner thread, with SIGKILL as its parent-death signal.
pub(crate) fn spawn(cmd: Command) -> io::Result<Child> {
    let (reply, answer) = channel();
    spawner()
        .send((cmd, reply))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("spawner thread is gone"))?
}

fn spawner() -> &'static Sender<Job> {
    static SPAWNER: OnceLock<Sender<Job>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (jobs, inbox) = channel::<Job>();
        std::thread::Builder::new()
            .name("bulkwire-testenv-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in inbox {
                    die_with_parent(&mut cmd);
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("cannot start the spawner thread");
        jobs
    })
}

/// Arranges for the child to get SIGKILL when its parent goes away.
///
/// The signal is set in `pre_exec`, which std runs after `uid`/`gid` have been changed: the
/// kernel clears the parent-death signal on a credential change, so it must come last.
fn die_with_parent(cmd: &mut Command) {
    let parent = Pid::from_raw(std::process::id() as i32);
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // work is allowed. It makes two raw syscalls (prctl, getppid) and builds an io::Error from
    // an errno; it neither allocates nor takes locks.
    unsafe {
        cmd.pre_exec(move || {
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // The parent may have died between fork and prctl; then no signal will ever come.
            if getppid() != parent {
                return Err(Errno::SRCH.into());
            }
            Ok(())
        });
    }
}
