//! A throwaway PKI for TLS tests: a CA, a server certificate for 127.0.0.1 and localhost
//! and a client certificate, made with the `openssl` command (tests/run.sh installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// A test CA with a server certificate for 127.0.0.1 and a client certificate, made with
/// the `openssl` command (Debian package openssl) in a temp dir.
pub struct Pki {
    dir: TempDir,
}

impl Pki {
    /// A new CA in a temp dir, with `server.pem`/`server.key` (127.0.0.1 and localhost)
    /// and `client.pem`/`client.key` signed by it; `ca.pem` is the CA certificate.
    pub fn generate() -> Pki {
        let dir = TempDir::new().expect("temp dir");
        let pki = Pki { dir };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=forewarn test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &pki.file("ca.key"),
            "-out",
            &pki.file("ca.pem"),
        ]);
        // clientAuth too: etcd's JSON gateway dials etcd's own gRPC port with the server
        // certificate, and --client-cert-auth refuses it without (HTTP 503 "connection closed").
        pki.issue(
            "server",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth",
        );
        pki.issue("client", "extendedKeyUsage=clientAuth");
        pki
    }

    /// NAME.pem and NAME.key, signed by the CA with the given X.509 extensions.
    pub fn issue(&self, name: &str, extensions: &str) {
        let extfile = self.file(&format!("{name}.ext"));
        std::fs::write(&extfile, format!("{extensions}\n")).expect("write extensions");
        let request = self.file(&format!("{name}.csr"));
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN=forewarn test {name}"),
            "-keyout",
            &self.file(&format!("{name}.key")),
            "-out",
            &request,
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &request,
            "-days",
            "1",
            "-CA",
            &self.file("ca.pem"),
            "-CAkey",
            &self.file("ca.key"),
            "-CAcreateserial",
            "-extfile",
            &extfile,
            "-out",
            &self.file(&format!("{name}.pem")),
        ]);
    }

    /// The path of `name` (e.g. "ca.pem") in the PKI's directory.
    pub fn file(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }
}

/// A self-signed certificate and its key, `dir/NAME.pem` and `dir/NAME.key`, made as
/// `openssl req -x509` makes them (so `CA:TRUE`, by openssl's default config), for `names`
/// (a subjectAltName value, e.g. "IP:127.0.0.1,DNS:localhost"); their paths.
pub fn self_signed(dir: &Path, name: &str, names: &str) -> (String, String) {
    let cert = dir.join(format!("{name}.pem")).display().to_string();
    let key = dir.join(format!("{name}.key")).display().to_string();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        &format!("/CN=forewarn self-signed test {name}"),
        "-addext",
        &format!("subjectAltName={names}"),
        "-keyout",
        &key,
        "-out",
        &cert,
    ]);
    (cert, key)
}

/// Runs `openssl ARGS`; panics with its output when it fails.
fn openssl(args: &[&str]) {
    let binary = find_on_path("openssl").unwrap_or_else(|| {
        panic!(
            "openssl is not installed: the TLS test makes its certificates with it. \
             Install it with `apt-get install -y openssl`"
        )
    });
    let output = Command::new(binary)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run openssl: {error}"));
    assert!(output.status.success(), "openssl {args:?}: {output:?}");
}

/// The first `program` on PATH.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}
