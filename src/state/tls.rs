//! TLS settings: the `tls-*` parameters turned into rustls configurations,
//! for the TLS listener (a server configuration) and for outgoing links
//! such as replication (a client configuration). The current ones live in
//! [`Tls`], swapped whole by CONFIG SET so that the next connection uses
//! the new certificates. The handshakes themselves happen in `server`.
//!
//! rustls implements TLS 1.2 and 1.3 only: `tls-protocols` naming TLSv1 or
//! TLSv1.1 is refused, as are cipher names it has no suite for.

use std::sync::Arc;

use parking_lot::RwLock;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};

use super::config::{self, Config};

/// The configurations built from the `tls-*` parameters now in force.
#[derive(Default)]
pub struct Tls {
    server: RwLock<Option<Arc<ServerConfig>>>,
    client: RwLock<Option<Arc<ClientConfig>>>,
}

impl Tls {
    /// The server configuration a new TLS connection is accepted with
    /// (`None` while TLS is not in use).
    pub fn server_config(&self) -> Option<Arc<ServerConfig>> {
        self.server.read().clone()
    }

    /// The client configuration an outgoing TLS link uses (`None` while
    /// TLS is not in use).
    pub fn client_config(&self) -> Option<Arc<ClientConfig>> {
        self.client.read().clone()
    }

    /// Builds both configurations from `c` and puts them in force; on an
    /// error (a missing or bad file, an unsupported protocol or cipher)
    /// nothing changes and the error says why.
    pub fn reload(&self, c: &Config) -> Result<(), String> {
        let built = Built::from_config(c)?;
        *self.server.write() = built.server;
        *self.client.write() = built.client;
        Ok(())
    }
}

/// A parameter's value, as CONFIG GET prints it.
pub fn setting(c: &Config, name: &str) -> String {
    config::find(name).map(|p| p.value(c)).unwrap_or_default()
}

/// `tls-port`: 0 when off.
pub fn port(c: &Config) -> u16 {
    setting(c, "tls-port").parse().unwrap_or(0)
}

/// Whether TLS is in use: a TLS port, or TLS for replication or the
/// cluster bus. Only then are the certificate files read (as Redis, which
/// accepts any file names while TLS is off).
pub fn in_use(c: &Config) -> bool {
    port(c) != 0 || setting(c, "tls-replication") == "yes" || setting(c, "tls-cluster") == "yes"
}

/// What [`Built::from_config`] made.
struct Built {
    server: Option<Arc<ServerConfig>>,
    client: Option<Arc<ClientConfig>>,
}

impl Built {
    fn from_config(c: &Config) -> Result<Built, String> {
        // The words are checked even while TLS is off: a mistake shows at
        // once, not when TLS is turned on.
        let versions = protocols(&setting(c, "tls-protocols"))?;
        unsupported(c)?;
        let provider = Arc::new(provider(
            &setting(c, "tls-ciphers"),
            &setting(c, "tls-ciphersuites"),
            &versions,
        )?);
        if !in_use(c) {
            return Ok(Built {
                server: None,
                client: None,
            });
        }
        let cert = setting(c, "tls-cert-file");
        let key = setting(c, "tls-key-file");
        if cert.is_empty() || key.is_empty() {
            return Err("tls-cert-file and tls-key-file must be set to use TLS".into());
        }
        let certs = load_certs(&cert)?;
        let key = load_key(&key, &setting(c, "tls-key-file-pass"))?;
        let roots = load_roots(
            &setting(c, "tls-ca-cert-file"),
            &setting(c, "tls-ca-cert-dir"),
        )?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS protocols: {e}"))?;
        let auth = setting(c, "tls-auth-clients");
        let builder = match (auth.as_str(), &roots) {
            ("no", _) => builder.with_no_client_auth(),
            (_, None) => {
                return Err(format!(
                    "tls-auth-clients {auth} needs tls-ca-cert-file or tls-ca-cert-dir to verify client certificates"
                ))
            }
            (_, Some(roots)) => {
                let v = WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots.clone()),
                    provider.clone(),
                );
                let v = if auth == "optional" {
                    v.allow_unauthenticated()
                } else {
                    v
                };
                let v = v
                    .build()
                    .map_err(|e| format!("client certificate verifier: {e}"))?;
                builder.with_client_cert_verifier(v)
            }
        };
        let mut server = builder
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| format!("{cert} and its key do not go together: {e}"))?;
        server.ignore_client_order = setting(c, "tls-prefer-server-ciphers") == "yes";
        if setting(c, "tls-session-caching") == "yes" {
            let size = setting(c, "tls-session-cache-size")
                .parse()
                .unwrap_or(20480);
            server.session_storage = rustls::server::ServerSessionMemoryCache::new(size);
        } else {
            server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
            server.send_tls13_tickets = 0;
        }

        // The outgoing side (replication): its own certificate if
        // tls-client-cert-file is set, else the server's, as Redis.
        let client_cert = setting(c, "tls-client-cert-file");
        let (ccerts, ckey) = if client_cert.is_empty() {
            (certs, key)
        } else {
            (
                load_certs(&client_cert)?,
                load_key(
                    &setting(c, "tls-client-key-file"),
                    &setting(c, "tls-client-key-file-pass"),
                )?,
            )
        };
        let client = match roots {
            None => None,
            Some(roots) => {
                let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider.clone(),
                )
                .build()
                .map_err(|e| format!("server certificate verifier: {e}"))?;
                let client = ClientConfig::builder_with_provider(provider)
                    .with_protocol_versions(&versions)
                    .map_err(|e| format!("TLS protocols: {e}"))?
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
                    .with_client_auth_cert(ccerts, ckey)
                    .map_err(|e| format!("{client_cert} and its key do not go together: {e}"))?;
                Some(Arc::new(client))
            }
        };
        Ok(Built {
            server: Some(Arc::new(server)),
            client,
        })
    }
}

/// Settings rustls has nothing to apply to are refused rather than
/// accepted and ignored: DH parameters (it has no DHE suites) and a
/// session-cache timeout other than Redis's default (its cache has no
/// expiry).
fn unsupported(c: &Config) -> Result<(), String> {
    if !setting(c, "tls-dh-params-file").is_empty() {
        return Err(
            "tls-dh-params-file is not supported: rustls has no DHE cipher suites to use it".into(),
        );
    }
    if setting(c, "tls-session-cache-timeout") != "300" {
        return Err(
            "tls-session-cache-timeout other than 300 is not supported: rustls's session cache has no expiry"
                .into(),
        );
    }
    Ok(())
}

/// `tls-protocols`: the versions named (both when empty).
fn protocols(value: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut out: Vec<&'static SupportedProtocolVersion> = Vec::new();
    for word in value.split_whitespace() {
        let v = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.0" | "tlsv1.1" => {
                return Err(format!(
                "{word} is not supported: Rostrum's TLS (rustls) speaks TLSv1.2 and TLSv1.3 only"
            ))
            }
            _ => return Err(format!("Invalid tls-protocols specified: {word}")),
        };
        if !out.iter().any(|o| o.version == v.version) {
            out.push(v);
        }
    }
    if out.is_empty() {
        out = vec![&rustls::version::TLS13, &rustls::version::TLS12];
    }
    Ok(out)
}

/// The TLS 1.2 suites by their OpenSSL names (`tls-ciphers`).
const TLS12_NAMES: &[(&str, &str)] = &[
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
];

/// The rustls suite named `name` (its IANA name), if rustls has it.
/// (rustls spells the TLS 1.3 ones `TLS13_...`.)
fn suite(name: &str) -> Option<SupportedCipherSuite> {
    let upper = name.to_ascii_uppercase();
    let rustls_name = upper.replacen("TLS_", "TLS13_", 1);
    rustls::crypto::ring::ALL_CIPHER_SUITES
        .iter()
        .find(|s| {
            let n = s.suite().as_str();
            n == Some(upper.as_str())
                || (s.version() == &rustls::version::TLS13 && n == Some(rustls_name.as_str()))
        })
        .copied()
}

/// Splits an OpenSSL cipher list (`:`, `,` or spaces between names).
fn cipher_words(value: &str) -> impl Iterator<Item = &str> {
    value
        .split([':', ',', ' '])
        .map(str::trim)
        .filter(|w| !w.is_empty())
}

/// The crypto provider with the suites `tls-ciphers` (TLS 1.2, OpenSSL
/// names; empty, `DEFAULT`, `HIGH` or `ALL`: every one) and
/// `tls-ciphersuites` (TLS 1.3, IANA names; empty: every one) allow.
fn provider(
    ciphers: &str,
    suites13: &str,
    versions: &[&'static SupportedProtocolVersion],
) -> Result<CryptoProvider, String> {
    let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
    // TLS 1.3 first: rustls picks the first suite both sides have.
    if suites13.trim().is_empty() {
        chosen.extend(
            rustls::crypto::ring::ALL_CIPHER_SUITES
                .iter()
                .filter(|s| s.version() == &rustls::version::TLS13),
        );
    } else {
        for w in cipher_words(suites13) {
            match suite(w).filter(|s| s.version() == &rustls::version::TLS13) {
                Some(s) => chosen.push(s),
                None => {
                    return Err(format!(
                        "Unsupported TLSv1.3 ciphersuite '{w}' in tls-ciphersuites (supported: TLS_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256)"
                    ))
                }
            }
        }
    }
    let all12 = || {
        rustls::crypto::ring::ALL_CIPHER_SUITES
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS12)
            .copied()
    };
    let words: Vec<&str> = cipher_words(ciphers).collect();
    if words.is_empty()
        || words
            .iter()
            .all(|w| ["DEFAULT", "HIGH", "ALL"].contains(&w.to_ascii_uppercase().as_str()))
    {
        chosen.extend(all12());
    } else {
        for w in words {
            let iana = TLS12_NAMES
                .iter()
                .find(|(openssl, iana)| {
                    openssl.eq_ignore_ascii_case(w) || iana.eq_ignore_ascii_case(w)
                })
                .map(|(_, iana)| *iana);
            match iana.and_then(suite) {
                Some(s) => chosen.push(s),
                None => {
                    let known: Vec<&str> = TLS12_NAMES.iter().map(|(o, _)| *o).collect();
                    return Err(format!(
                        "Unsupported TLSv1.2 cipher '{w}' in tls-ciphers (supported: {}, or DEFAULT)",
                        known.join(", ")
                    ));
                }
            }
        }
    }
    for v in versions {
        if !chosen.iter().any(|s| s.version() == *v) {
            return Err(format!(
                "no cipher left for {:?} (tls-ciphers / tls-ciphersuites)",
                v.version
            ));
        }
    }
    Ok(CryptoProvider {
        cipher_suites: chosen,
        ..rustls::crypto::ring::default_provider()
    })
}

/// The certificates of a PEM file (the leaf first).
fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("Failed to load certificate: {path}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("Failed to load certificate: {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load certificate: {path}: no certificate in it"
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file: PKCS#8 (encrypted with `pass` when it
/// says so: PBES2, as `openssl pkcs8 -topk8` writes), PKCS#1 or SEC1.
/// Encrypted keys in the older OpenSSL format (`Proc-Type: 4,ENCRYPTED`)
/// are refused with how to convert them.
pub fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let fail = |why: String| format!("Failed to load private key: {path}: {why}");
    let text = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    key_from_pem(&text, pass).map_err(fail)
}

/// [`load_key`] on the file's bytes.
fn key_from_pem(text: &[u8], pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let s = String::from_utf8_lossy(text);
    if s.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(
            "keys encrypted in the legacy OpenSSL format are not supported; \
             convert it to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)"
                .into(),
        );
    }
    const ENC: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    if let Some(start) = s.find(ENC) {
        if pass.is_empty() {
            return Err("the key is encrypted and tls-key-file-pass is not set".into());
        }
        let (_, doc) = pkcs8::Document::from_pem(&s[start..])
            .map_err(|e| format!("not an encrypted PKCS#8 key: {e}"))?;
        let info = pkcs8::EncryptedPrivateKeyInfoRef::try_from(doc.as_bytes())
            .map_err(|e| format!("not an encrypted PKCS#8 key: {e}"))?;
        let plain = info.decrypt(pass.as_bytes()).map_err(|e| {
            format!("cannot decrypt it (wrong tls-key-file-pass, or an unsupported scheme): {e}")
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    PrivateKeyDer::from_pem_slice(text).map_err(|e| format!("no private key in it ({e})"))
}

/// The trusted CAs of `tls-ca-cert-file` and every certificate in the
/// files of `tls-ca-cert-dir`; `None` when neither is set.
fn load_roots(file: &str, dir: &str) -> Result<Option<RootCertStore>, String> {
    if file.is_empty() && dir.is_empty() {
        return Ok(None);
    }
    let mut roots = RootCertStore::empty();
    let mut add = |cert: CertificateDer<'static>, from: &str| {
        roots
            .add(cert)
            .map_err(|e| format!("Failed to configure CA certificate(s) from {from}: {e}"))
    };
    if !file.is_empty() {
        for cert in load_certs(file)? {
            add(cert, file)?;
        }
    }
    if !dir.is_empty() {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("Failed to configure CA certificate(s) from {dir}: {e}"))?;
        for entry in entries.flatten() {
            let path = entry.path();
            // Files holding no certificate (an index, a CRL) are passed
            // over, as OpenSSL's hashed directories may hold them.
            let Ok(iter) = CertificateDer::pem_file_iter(&path) else {
                continue;
            };
            for cert in iter.flatten() {
                add(cert, &path.display().to_string())?;
            }
        }
    }
    if roots.is_empty() {
        return Err("Failed to configure CA certificate(s): none found".into());
    }
    Ok(Some(roots))
}

/// Checks a primary's certificate chain against the configured CAs but not
/// its name, as Redis does over OpenSSL (a replica names its primary by
/// address, which certificates seldom list).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // The name is checked after the chain: this error means the
            // chain was good.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_refuse_what_rustls_lacks() {
        assert_eq!(protocols("").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocols("tlsv1.2 TLSv1.3 TLSv1.3").unwrap().len(), 2);
        let e = protocols("TLSv1.1 TLSv1.2").unwrap_err();
        assert!(e.contains("TLSv1.1 is not supported"), "{e}");
        assert!(protocols("SSLv3").is_err());
    }

    #[test]
    fn cipher_names_map_to_rustls_suites() {
        let both = protocols("").unwrap();
        let p = provider("", "", &both).unwrap();
        assert_eq!(p.cipher_suites.len(), 9);
        let p = provider(
            "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384",
            "TLS_AES_128_GCM_SHA256",
            &both,
        )
        .unwrap();
        assert_eq!(p.cipher_suites.len(), 3);
        let e = provider("AES128-SHA", "", &both).unwrap_err();
        assert!(e.contains("Unsupported TLSv1.2 cipher 'AES128-SHA'"), "{e}");
        let e = provider("", "TLS_AES_128_CCM_SHA256", &both).unwrap_err();
        assert!(e.contains("TLS_AES_128_CCM_SHA256"), "{e}");
        // A TLS 1.2 suite named where a TLS 1.3 one goes.
        assert!(provider("", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", &both).is_err());
    }

    #[test]
    fn encrypted_pkcs8_keys_are_decrypted_or_refused() {
        use pkcs8::der::Decode;
        let key = rcgen::KeyPair::generate().unwrap();
        let der = key.serialize_der();
        let params = pkcs8::pkcs5::pbes2::Parameters::generate_pbkdf2_sha256_aes256cbc(
            2048, &[7u8; 16], [9u8; 16],
        )
        .unwrap();
        let info = pkcs8::PrivateKeyInfoRef::from_der(&der).unwrap();
        let enc = info.encrypt_with_params(params, "s3cret").unwrap();
        let pem = enc
            .to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
            .unwrap();
        let got = key_from_pem(pem.as_bytes(), "s3cret").unwrap();
        assert_eq!(got.secret_der(), &der[..]);
        assert!(key_from_pem(pem.as_bytes(), "wrong").is_err());
        let e = key_from_pem(pem.as_bytes(), "").unwrap_err();
        assert!(e.contains("tls-key-file-pass"), "{e}");
        let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n";
        assert!(key_from_pem(legacy.as_bytes(), "x")
            .unwrap_err()
            .contains("legacy"));
    }
}
