//! TLS to PostgreSQL with the parameters libpq users already write in
//! their URLs (libpq "SSL Support", §34.19): `sslmode` (`disable`,
//! `prefer`, `require`, `verify-ca`, `verify-full`; default `prefer`, as
//! libpq), `sslrootcert` (a PEM file, or `system` for the operating
//! system's store), `sslcert` and `sslkey` (a client certificate, for
//! `hostssl … cert` in `pg_hba.conf`).
//!
//! tokio-postgres itself knows only `disable`, `prefer` and `require` and
//! refuses the other parameters, so they are taken out of the URL here and
//! turned into a rustls configuration: `verify-full` checks the chain to
//! the root certificate and the host name, `verify-ca` the chain only,
//! `require` and `prefer` encrypt without checking (as libpq; `require`
//! with an `sslrootcert` checks the chain, as libpq does too). rustls on
//! `ring`, no OpenSSL: the static build needs no C library of TLS.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(s: &str) -> Result<Mode, String> {
        Ok(match s {
            "disable" => Mode::Disable,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            // libpq's `allow` tries plain first: bulkwire never prefers clear text.
            _ => {
                return Err(format!(
                    "sslmode={s:?}: expected disable, prefer, require, verify-ca or verify-full"
                ))
            }
        })
    }

    /// What tokio-postgres is told: whether TLS is attempted and required.
    pub fn ssl_mode(self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        })
    }
}

/// Where the trusted root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    File(PathBuf),
    /// `sslrootcert=system`: the operating system's store.
    System,
}

/// The TLS parameters of one URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub mode: Mode,
    pub rootcert: Option<RootCert>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl Tls {
    /// Takes libpq's TLS parameters out of a `postgres://` URL's query and
    /// returns the URL tokio-postgres can parse, and them.
    pub fn split(url: &str) -> Result<(String, Tls), String> {
        let mut tls = Tls {
            mode: Mode::Prefer,
            rootcert: None,
            cert: None,
            key: None,
        };
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_string(), tls));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = unescape(v);
            match k {
                "sslmode" => tls.mode = Mode::parse(&v)?,
                "sslrootcert" if v == "system" => tls.rootcert = Some(RootCert::System),
                "sslrootcert" => tls.rootcert = Some(RootCert::File(v.into())),
                "sslcert" => tls.cert = Some(v.into()),
                "sslkey" => tls.key = Some(v.into()),
                _ => kept.push(pair),
            }
        }
        let url = match kept.is_empty() {
            true => base.to_string(),
            false => format!("{base}?{}", kept.join("&")),
        };
        tls.check()?;
        Ok((url, tls))
    }

    fn check(&self) -> Result<(), String> {
        if self.rootcert == Some(RootCert::System) && self.mode != Mode::VerifyFull {
            // libpq's rule: the public store trusts every public CA, so
            // without the host name check any of their certificates would do.
            return Err(format!(
                "sslmode={} may not be used with sslrootcert=system (use verify-full)",
                self.mode
            ));
        }
        if self.mode >= Mode::VerifyCa && self.rootcert.is_none() {
            return Err(format!(
                "sslmode={} needs sslrootcert (a PEM file of the CA, or system)",
                self.mode
            ));
        }
        if self.cert.is_some() != self.key.is_some() {
            return Err("sslcert and sslkey go together (a client certificate and its key)".into());
        }
        Ok(())
    }

    /// Whether the server's certificate is checked: the chain (verify-ca,
    /// or require with a root certificate, as libpq) and the host name
    /// (verify-full).
    fn checks(&self) -> (bool, bool) {
        let chain =
            self.mode >= Mode::VerifyCa || (self.mode == Mode::Require && self.rootcert.is_some());
        (chain, self.mode == Mode::VerifyFull)
    }

    /// What `--check` says about the certificate.
    pub fn verified(&self) -> &'static str {
        match self.checks() {
            (true, true) => "certificate verified (chain to sslrootcert and host name)",
            (true, false) => "certificate chain verified (host name not checked)",
            _ => "certificate not verified",
        }
    }

    /// The connector tokio-postgres uses (for `disable` too: it is then
    /// never asked for a handshake).
    pub fn connector(&self) -> Result<MakeRustlsConnect, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match self.checks() {
            (false, _) => Arc::new(NoCheck(provider.clone())),
            (true, full) => {
                let roots = Arc::new(self.roots()?);
                let inner = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| format!("sslrootcert: {e}"))?;
                Arc::new(Chain { inner, full })
            }
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("sslcert {}: {e}", cert.display()))?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("sslkey {}: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("sslcert/sslkey: {e}"))?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(MakeRustlsConnect::new(config))
    }

    fn roots(&self) -> Result<RootCertStore, String> {
        let mut roots = RootCertStore::empty();
        match &self.rootcert {
            Some(RootCert::File(path)) => {
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("sslrootcert {}: {e}", path.display()))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!("sslrootcert {}: no certificate", path.display()));
                }
            }
            Some(RootCert::System) => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err("sslrootcert=system: the system store has no certificate".into());
                }
            }
            None => unreachable!("checked in Tls::split"),
        }
        Ok(roots)
    }
}

/// `%XX` escapes of a query value (a path with spaces, `%2F`).
fn unescape(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b.get(i + 1..i + 3).and_then(|h| {
            std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        });
        match (b[i], hex) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// verify-ca and verify-full: webpki's checks; verify-ca forgives only a
/// name that does not match, which webpki reports after the chain passed.
#[derive(Debug)]
struct Chain {
    inner: Arc<WebPkiServerVerifier>,
    full: bool,
}

impl ServerCertVerifier for Chain {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let r = self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now);
        match r {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.full => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// prefer and require (libpq's meaning): encrypted, the certificate taken
/// as it comes; the handshake's signatures are still checked.
#[derive(Debug)]
struct NoCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCheck {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_parameters_leave_the_url() {
        let (url, tls) = Tls::split(
            "postgres://u@h:5432/db?application_name=x&sslmode=verify-full&sslrootcert=/a%20b/ca.pem",
        )
        .unwrap();
        assert_eq!(url, "postgres://u@h:5432/db?application_name=x");
        assert_eq!(tls.mode, Mode::VerifyFull);
        assert_eq!(tls.rootcert, Some(RootCert::File("/a b/ca.pem".into())));
        let (url, tls) = Tls::split("postgres://u@h/db").unwrap();
        assert_eq!(
            (url.as_str(), tls.mode),
            ("postgres://u@h/db", Mode::Prefer)
        );
        let (_, tls) = Tls::split("postgres://u@h/db?sslmode=require&sslrootcert=/ca").unwrap();
        assert_eq!(
            tls.checks(),
            (true, false),
            "require with a root: verify-ca"
        );
        let (_, tls) = Tls::split("postgres://u@h/db?sslmode=require").unwrap();
        assert_eq!(tls.checks(), (false, false));
    }

    #[test]
    fn bad_combinations_are_one_line_each() {
        for (url, want) in [
            ("postgres://h/db?sslmode=allow", "sslmode=\"allow\""),
            ("postgres://h/db?sslmode=verify-ca", "needs sslrootcert"),
            (
                "postgres://h/db?sslmode=require&sslrootcert=system",
                "verify-full",
            ),
            ("postgres://h/db?sslcert=/c", "sslkey"),
        ] {
            let e = Tls::split(url).unwrap_err();
            assert!(e.contains(want) && !e.contains('\n'), "{url}: {e}");
        }
    }
}
