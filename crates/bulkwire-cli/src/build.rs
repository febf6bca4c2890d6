//! `bulkwire build`: a multipart/form-data body from fields and files,
//! streamed to a file or stdout; files are never read whole.

use bulkwire_multipart::Builder;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A text field, `name=value`.
    #[arg(long = "field", value_name = "NAME=VALUE")]
    fields: Vec<String>,
    /// A file field, `name=@path[;type=media/type][;filename=name]`.
    #[arg(long = "file", value_name = "NAME=@PATH")]
    files: Vec<String>,
    /// Use this boundary instead of a random one.
    #[arg(long)]
    boundary: Option<String>,
    /// Write the body here; without it the body goes to stdout and the
    /// Content-Type line to stderr.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
}

pub fn run(args: Args) -> ExitCode {
    match build(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bulkwire build: {e}");
            ExitCode::from(1)
        }
    }
}

/// `e`, with what it happened to.
fn named(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// A parsed `--file` value.
struct FileArg<'a> {
    name: &'a str,
    path: &'a str,
    content_type: Option<&'a str>,
    filename: Option<&'a str>,
}

fn file_arg(spec: &str) -> io::Result<FileArg<'_>> {
    let (name, rest) = spec
        .split_once("=@")
        .ok_or_else(|| invalid(format!("--file {spec}: expected NAME=@PATH")))?;
    let mut items = rest.split(';');
    let path = items.next().unwrap_or_default();
    let mut f = FileArg {
        name,
        path,
        content_type: None,
        filename: None,
    };
    for item in items {
        match item.split_once('=') {
            Some(("type", v)) => f.content_type = Some(v),
            Some(("filename", v)) => f.filename = Some(v),
            _ => return Err(invalid(format!("--file {spec}: unknown option {item}"))),
        }
    }
    Ok(f)
}

fn build(args: &Args) -> io::Result<()> {
    let mut b = Builder::new();
    if let Some(boundary) = &args.boundary {
        b.boundary(boundary)?;
    }
    for f in &args.fields {
        let (name, value) = f
            .split_once('=')
            .ok_or_else(|| invalid(format!("--field {f}: expected NAME=VALUE")))?;
        b.text(name, value);
    }
    for spec in &args.files {
        let f = file_arg(spec)?;
        // The builder opens files lazily, while streaming: check now, so the
        // error names the file before any output is written.
        std::fs::metadata(f.path).map_err(|e| named(&format!("--file {spec}: {}", f.path), e))?;
        b.file(f.name, f.path, f.filename, f.content_type)
            .map_err(|e| named(&format!("--file {spec}"), e))?;
    }
    let body = b.finish()?;
    let header = format!("Content-Type: {}", body.content_type());
    let mut reader = body.into_reader();
    match &args.output {
        Some(path) => {
            let file = File::create(path).map_err(|e| named(&path.display().to_string(), e))?;
            let mut out = BufWriter::new(file);
            io::copy(&mut reader, &mut out)?;
            out.flush()?;
            println!("{header}");
        }
        None => {
            eprintln!("{header}");
            let mut out = io::stdout().lock();
            io::copy(&mut reader, &mut out)?;
            out.flush()?;
        }
    }
    Ok(())
}
