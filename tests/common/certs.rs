//! Test certificates, made with rcgen into a temporary directory: a CA,
//! a server certificate for localhost / 127.0.0.1, a client certificate,
//! an expired client certificate, and a second CA with a server and a
//! client certificate of its own (untrusted by the first).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The files, by role (each `name.crt` and `name.key` in `dir`).
pub struct Pki {
    pub dir: PathBuf,
}

struct Ca {
    issuer: Issuer<'static, KeyPair>,
}

fn ca(dir: &Path, name: &str) -> Ca {
    let key = KeyPair::generate().expect("key");
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(DnType::CommonName, format!("Rostrum test {name}"));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = p.self_signed(&key).expect("self-signed");
    std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).expect("write");
    Ca {
        issuer: Issuer::new(p, key),
    }
}

fn leaf(dir: &Path, ca: &Ca, name: &str, server: bool, expired: bool) {
    let key = KeyPair::generate().expect("key");
    let sans = if server {
        vec!["localhost".to_string(), "127.0.0.1".to_string()]
    } else {
        Vec::new()
    };
    let mut p = CertificateParams::new(sans).expect("params");
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    if expired {
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let cert = p.signed_by(&key, &ca.issuer).expect("sign");
    std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).expect("write");
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).expect("write");
}

impl Pki {
    /// Makes every certificate in a fresh directory: `ca`, `server`,
    /// `client`, `expired` (a client's, out of date), and `ca2` with
    /// `server2` and `untrusted` (a client's).
    pub fn new() -> Pki {
        let dir = super::temp_dir("pki");
        let ca1 = ca(&dir, "ca");
        leaf(&dir, &ca1, "server", true, false);
        leaf(&dir, &ca1, "client", false, false);
        leaf(&dir, &ca1, "expired", false, true);
        let ca2 = ca(&dir, "ca2");
        leaf(&dir, &ca2, "server2", true, false);
        leaf(&dir, &ca2, "untrusted", false, false);
        Pki { dir }
    }

    /// The path of `name` (`ca.crt`, `client.key`, ...), as text.
    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// The server arguments for TLS on `tls_port` with the first CA's
    /// server certificate, client certificates checked against that CA.
    pub fn server_args(&self, tls_port: u16) -> Vec<String> {
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            self.path("server.crt"),
            "--tls-key-file".into(),
            self.path("server.key"),
            "--tls-ca-cert-file".into(),
            self.path("ca.crt"),
        ]
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
