//! Where S3 credentials come from: the AWS SDKs' default chain, in its
//! order (the SDKs' "Standardized credential providers"):
//!
//! 1. static keys: `[s3]`'s, else `AWS_ACCESS_KEY_ID`,
//!    `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` (temporary keys);
//! 2. the shared files: `AWS_PROFILE` (else `default`) in
//!    `AWS_SHARED_CREDENTIALS_FILE` (`~/.aws/credentials`) and
//!    `AWS_CONFIG_FILE` (`~/.aws/config`), static keys only;
//! 3. web identity: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`
//!    (STS `AssumeRoleWithWebIdentity`, at `AWS_ENDPOINT_URL_STS` if set);
//! 4. container credentials: `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (ECS
//!    task roles, at `169.254.170.2`), or `AWS_CONTAINER_CREDENTIALS_FULL_URI`
//!    with the token in `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (EKS Pod
//!    Identity);
//! 5. the EC2 instance metadata service, IMDSv2 (a session token by `PUT`,
//!    then the role's keys), at `AWS_EC2_METADATA_SERVICE_ENDPOINT` (else
//!    `http://169.254.169.254`), unless `AWS_EC2_METADATA_DISABLED=true`.
//!
//! Steps 3 to 5 are `object_store`'s own providers, which cache temporary
//! keys and fetch new ones five minutes before they expire, so a request
//! (a part of a long multipart upload) always signs with keys that are
//! still valid. This module only picks the step, reads the shared files
//! (which `object_store` does not), and names the source for `--check`,
//! never the secret.
//!
//! The last step is a trap off EC2: nothing answers at 169.254.169.254,
//! and a client would wait on it. [`Source::Instance`] is therefore probed
//! once at start (`metadata_timeout`, 1 s by default): no answer means no
//! credential source at all, said in one line.

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The IMDS address the SDKs use when `AWS_EC2_METADATA_SERVICE_ENDPOINT` is unset.
pub const DEFAULT_METADATA_ENDPOINT: &str = "http://169.254.169.254";

/// The source the chain chose.
#[derive(Clone, PartialEq, Eq)]
pub enum Source {
    /// Keys given outright (`from`: `[s3]` or the environment).
    Static {
        from: &'static str,
        key_id: String,
        secret: String,
        token: Option<String>,
    },
    /// Keys of a profile in the shared files.
    Profile {
        name: String,
        file: PathBuf,
        key_id: String,
        secret: String,
        token: Option<String>,
    },
    WebIdentity {
        role_arn: String,
        token_file: String,
        sts: Option<String>,
    },
    Container {
        relative: Option<String>,
        full: Option<String>,
        token_file: Option<String>,
    },
    Instance {
        endpoint: String,
    },
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Source {
    /// What `--check` prints: the source and what identifies it, never a
    /// secret or a session token.
    pub fn describe(&self) -> String {
        let temp = |t: &Option<String>| {
            if t.is_some() {
                " with a session token"
            } else {
                ""
            }
        };
        match self {
            Source::Static {
                from,
                key_id,
                token,
                ..
            } => format!("static keys from {from} (key id {key_id}{})", temp(token)),
            Source::Profile {
                name,
                file,
                key_id,
                token,
                ..
            } => format!(
                "profile {name} in {} (key id {key_id}{})",
                file.display(),
                temp(token)
            ),
            Source::WebIdentity { role_arn, sts, .. } => format!(
                "web identity for {role_arn} (STS {})",
                sts.as_deref().unwrap_or("of the region")
            ),
            Source::Container {
                relative: Some(r), ..
            } => format!("container credentials at http://169.254.170.2{r}"),
            Source::Container { full, .. } => format!(
                "container credentials at {}",
                full.as_deref().unwrap_or("?")
            ),
            Source::Instance { endpoint } => {
                format!("EC2 instance metadata (IMDSv2) at {endpoint}")
            }
        }
    }

    /// Picks the first source of the chain that is configured. `keys` are
    /// `[s3]`'s own (key id, secret, session token); `var` reads the
    /// environment. An error is one line: a half-given pair, a named
    /// profile that is not there, or no source at all when the instance
    /// metadata service is disabled.
    pub fn pick(
        keys: (Option<String>, Option<String>, Option<String>),
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Source, String> {
        let var = |k: &str| var(k).filter(|v| !v.is_empty());
        let given =
            |from, key_id: Option<String>, secret: Option<String>, token| match (key_id, secret) {
                (Some(key_id), Some(secret)) => Ok(Some(Source::Static {
                    from,
                    key_id,
                    secret,
                    token,
                })),
                (None, None) => Ok(None),
                _ => Err(format!(
                    "S3 credentials from {from}: an access key id needs its secret and back"
                )),
            };
        let (id, secret, token) = keys;
        if let Some(s) = given("[s3]", id, secret, token)? {
            return Ok(s);
        }
        let env = given(
            "the environment",
            var("AWS_ACCESS_KEY_ID"),
            var("AWS_SECRET_ACCESS_KEY"),
            var("AWS_SESSION_TOKEN"),
        )?;
        if let Some(s) = env {
            return Ok(s);
        }
        if let Some(s) = profile(&var)? {
            return Ok(s);
        }
        if let (Some(token_file), Some(role_arn)) =
            (var("AWS_WEB_IDENTITY_TOKEN_FILE"), var("AWS_ROLE_ARN"))
        {
            return Ok(Source::WebIdentity {
                role_arn,
                token_file,
                sts: var("AWS_ENDPOINT_URL_STS"),
            });
        }
        let relative = var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
        let full = var("AWS_CONTAINER_CREDENTIALS_FULL_URI");
        if relative.is_some() || full.is_some() {
            let token_file = var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
            if relative.is_none() && token_file.is_none() {
                return Err("AWS_CONTAINER_CREDENTIALS_FULL_URI is set without \
                    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (the token itself in \
                    AWS_CONTAINER_AUTHORIZATION_TOKEN is not supported: put it in a file)"
                    .into());
            }
            return Ok(Source::Container {
                relative,
                full,
                token_file,
            });
        }
        if var("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Err(no_source("AWS_EC2_METADATA_DISABLED=true"));
        }
        let endpoint = var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
            .unwrap_or_else(|| DEFAULT_METADATA_ENDPOINT.into());
        Ok(Source::Instance {
            endpoint: endpoint.trim_end_matches('/').to_string(),
        })
    }

    /// Gives the builder this source, and nothing of the others.
    pub fn apply(&self, b: AmazonS3Builder) -> AmazonS3Builder {
        use AmazonS3ConfigKey as K;
        match self.clone() {
            Source::Static {
                key_id,
                secret,
                token,
                ..
            }
            | Source::Profile {
                key_id,
                secret,
                token,
                ..
            } => {
                let b = b.with_access_key_id(key_id).with_secret_access_key(secret);
                match token {
                    Some(t) => b.with_token(t),
                    None => b,
                }
            }
            Source::WebIdentity {
                role_arn,
                token_file,
                sts,
            } => {
                let b = b
                    .with_config(K::WebIdentityTokenFile, token_file)
                    .with_config(K::RoleArn, role_arn);
                match sts {
                    Some(s) => b.with_config(K::StsEndpoint, s),
                    None => b,
                }
            }
            Source::Container {
                relative,
                full,
                token_file,
            } => match relative {
                Some(r) => b.with_config(K::ContainerCredentialsRelativeUri, r),
                None => b
                    .with_config(K::ContainerCredentialsFullUri, full.unwrap_or_default())
                    .with_config(
                        K::ContainerAuthorizationTokenFile,
                        token_file.unwrap_or_default(),
                    ),
            },
            Source::Instance { endpoint } => b.with_config(K::MetadataEndpoint, endpoint),
        }
    }
}

/// The one line for a start with nothing to sign with.
pub fn no_source(last: &str) -> String {
    format!(
        "no AWS credentials: none in [s3] or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, no profile \
         in the shared files, no AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, no \
         AWS_CONTAINER_CREDENTIALS_*, and {last}"
    )
}

/// Step 2: a profile with static keys. `AWS_PROFILE` names one that must
/// exist; without it, a `default` profile is used if there is one.
fn profile(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<Source>, String> {
    let named = var("AWS_PROFILE");
    let name = named.clone().unwrap_or_else(|| "default".into());
    let home = var("HOME").map(PathBuf::from);
    let file = |env: &str, rel: &str| {
        var(env)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(rel)))
    };
    let creds = file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    let config = file("AWS_CONFIG_FILE", ".aws/config");
    // The credentials file's section is the bare name; the config file's is
    // `profile NAME`, except `default`.
    let config_section = match name.as_str() {
        "default" => "default".to_string(),
        n => format!("profile {n}"),
    };
    let sections = [(creds, name.clone()), (config, config_section)];
    let mut seen = false;
    for (path, section) in sections {
        let Some(path) = path else { continue };
        let Some(keys) = read_section(&path, &section)? else {
            continue;
        };
        seen = true;
        if let (Some(key_id), Some(secret)) = (
            keys.get("aws_access_key_id").cloned(),
            keys.get("aws_secret_access_key").cloned(),
        ) {
            return Ok(Some(Source::Profile {
                name,
                file: path,
                key_id,
                secret,
                token: keys.get("aws_session_token").cloned(),
            }));
        }
    }
    match (named, seen) {
        (Some(n), false) => Err(format!(
            "AWS_PROFILE={n}: no such profile in the shared credentials or config file"
        )),
        (Some(n), true) => Err(format!(
            "AWS_PROFILE={n}: the profile has no aws_access_key_id and aws_secret_access_key \
             (role_arn, sso_* and credential_process profiles are not supported)"
        )),
        (None, _) => Ok(None),
    }
}

/// The keys of `[section]` in an INI file; `None` if the file or the
/// section is not there.
fn read_section(path: &Path, section: &str) -> Result<Option<HashMap<String, String>>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut current: Option<&str> = None;
    let mut found: Option<HashMap<String, String>> = None;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim());
            if current == Some(section) {
                found.get_or_insert_with(HashMap::new);
            }
            continue;
        }
        if current != Some(section) {
            continue;
        }
        if let (Some(map), Some((k, v))) = (found.as_mut(), line.split_once('=')) {
            map.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn none() -> (Option<String>, Option<String>, Option<String>) {
        (None, None, None)
    }

    #[test]
    fn the_chain_keeps_the_sdks_order() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials");
        std::fs::write(
            &creds,
            "[default]\naws_access_key_id = D\naws_secret_access_key = d\n\n[ci]\n\
             aws_access_key_id=C\naws_secret_access_key=c\naws_session_token=t\n",
        )
        .unwrap();
        let creds = creds.to_str().unwrap();
        let all = [
            ("AWS_ACCESS_KEY_ID", "E"),
            ("AWS_SECRET_ACCESS_KEY", "e"),
            ("AWS_SESSION_TOKEN", "st"),
            ("AWS_SHARED_CREDENTIALS_FILE", creds),
            ("AWS_PROFILE", "ci"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
            ("AWS_ROLE_ARN", "arn:r"),
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:9/c"),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/tok"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:8/"),
        ];
        let mine = (Some("M".into()), Some("m".into()), None);
        let s = Source::pick(mine, &env(&all)).unwrap();
        assert_eq!(s.describe(), "static keys from [s3] (key id M)");
        let mut rest = &all[..];
        let want = [
            "static keys from the environment (key id E with a session token)",
            "profile ci in",
            "web identity for arn:r (STS of the region)",
            "container credentials at http://127.0.0.1:9/c",
            "EC2 instance metadata (IMDSv2) at http://127.0.0.1:8",
        ];
        for (w, skip) in want.iter().zip([3, 2, 2, 2, 0]) {
            let d = Source::pick(none(), &env(rest)).unwrap().describe();
            assert!(d.starts_with(w), "{d} / {w}");
            rest = &rest[skip..];
        }
        // No AWS_PROFILE: the default profile.
        let d = Source::pick(none(), &env(&[("AWS_SHARED_CREDENTIALS_FILE", creds)])).unwrap();
        assert!(d.describe().starts_with("profile default"), "{d:?}");
    }

    #[test]
    fn what_cannot_work_is_one_line() {
        let e = Source::pick(none(), &env(&[("AWS_ACCESS_KEY_ID", "x")])).unwrap_err();
        assert!(e.contains("needs its secret"), "{e}");
        let e = Source::pick(
            none(),
            &env(&[("AWS_PROFILE", "nope"), ("HOME", "/nonexistent")]),
        )
        .unwrap_err();
        assert!(e.contains("AWS_PROFILE=nope: no such profile"), "{e}");
        let e = Source::pick(none(), &env(&[("AWS_EC2_METADATA_DISABLED", "true")])).unwrap_err();
        assert!(
            e.starts_with("no AWS credentials") && !e.contains('\n'),
            "{e}"
        );
        let e = Source::pick(
            none(),
            &env(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://x")]),
        )
        .unwrap_err();
        assert!(e.contains("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"), "{e}");
    }

    #[test]
    fn secrets_never_show() {
        let s = Source::pick(
            none(),
            &env(&[
                ("AWS_ACCESS_KEY_ID", "AKID"),
                ("AWS_SECRET_ACCESS_KEY", "hunter2"),
                ("AWS_SESSION_TOKEN", "sessiontok"),
            ]),
        )
        .unwrap();
        let d = format!("{s:?} {}", s.describe());
        assert!(!d.contains("hunter2") && !d.contains("sessiontok"), "{d}");
    }
}
