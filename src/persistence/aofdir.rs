//! The AOF's files in Redis 7.0's layout: a folder `dir`/`appenddirname`
//! holding a base file (`<appendfilename>.<seq>.base.rdb` with
//! `aof-use-rdb-preamble yes`, `.base.aof` of commands with `no`), the
//! incremental files the writer appends to (`<appendfilename>.<seq>.incr.aof`)
//! and the manifest naming them in load order
//! (`<appendfilename>.manifest`, lines `file <name> seq <n> type b|h|i`).
//!
//! What lives here: the manifest's format, where each file goes, the
//! start-up (upgrading a single `appendonly.aof` as Redis 7 does: it
//! becomes the base, moved into the folder; loading base then incrs;
//! creating the first base and incr) and the file swap at the end of a
//! rewrite (new base, new empty incr, manifest replaced atomically, old
//! files marked history then deleted). What does not: writing the snapshot
//! (`rewrite`, `state::journal::snapshot`) and replaying a file (`load`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::state::journal::writer::error_text;
use crate::state::Server;

/// What a manifest line says a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// `b`: the base, loaded first.
    Base,
    /// `h`: replaced by a rewrite, to be deleted; never loaded.
    History,
    /// `i`: incremental, loaded after the base in manifest order.
    Incr,
}

impl FileType {
    fn letter(self) -> char {
        match self {
            FileType::Base => 'b',
            FileType::History => 'h',
            FileType::Incr => 'i',
        }
    }
}

/// One file of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofFile {
    pub name: String,
    pub seq: u64,
    pub kind: FileType,
}

/// The manifest: the base, the history files and the incrs, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<AofFile>,
    pub history: Vec<AofFile>,
    pub incrs: Vec<AofFile>,
}

/// Splits a line as Redis's `sdssplitargs` does for the manifest: words,
/// or double-quoted strings with `\"`, `\\`, `\n` and `\xHH` escapes.
fn split_args(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Some(out);
        };
        let mut word = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => match chars.next()? {
                        'n' => word.push('\n'),
                        'r' => word.push('\r'),
                        't' => word.push('\t'),
                        'x' => {
                            let h: String = [chars.next()?, chars.next()?].iter().collect();
                            word.push(u8::from_str_radix(&h, 16).ok()? as char);
                        }
                        c => word.push(c),
                    },
                    c => word.push(c),
                }
            }
            // A closing quote must be followed by a space or the end.
            if chars.peek().is_some_and(|c| !c.is_ascii_whitespace()) {
                return None;
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_ascii_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        out.push(word);
    }
}

/// A file name as Redis writes it in the manifest (quoted when it holds
/// spaces, quotes or control characters).
fn quote(name: &str) -> String {
    if !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\' && c != '\'')
    {
        return name.to_string();
    }
    let mut s = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                s.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

impl Manifest {
    /// Parses a manifest as Redis 7.0 does (`aofLoadManifestFromFile`):
    /// `#` lines are comments, each line is `key value` pairs among which
    /// `file`, `seq` and `type` are required; one base at most.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        let mut any = false;
        for raw in text.split_inclusive('\n') {
            if raw.starts_with('#') {
                continue;
            }
            if !raw.ends_with('\n') {
                return Err("The AOF manifest file is invalid format".into());
            }
            let line = raw.trim_end_matches(['\n', '\r']);
            if line.len() > 1024 {
                return Err("The AOF manifest file contains too long line".into());
            }
            let args = split_args(line).ok_or("Invalid AOF manifest file format")?;
            if args.len() < 6 || args.len() % 2 != 0 {
                return Err("Invalid AOF manifest file format".into());
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for pair in args.chunks_exact(2) {
                match pair[0].as_str() {
                    "file" => name = Some(pair[1].clone()),
                    "seq" => seq = pair[1].parse::<u64>().ok(),
                    "type" => {
                        kind = match pair[1].as_str() {
                            "b" => Some(FileType::Base),
                            "h" => Some(FileType::History),
                            "i" => Some(FileType::Incr),
                            _ => None,
                        }
                    }
                    // Later versions may add keys: ignored, as Redis does.
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err("Invalid AOF manifest file format".into());
            };
            any = true;
            let f = AofFile { name, seq, kind };
            match kind {
                FileType::Base => {
                    if m.base.is_some() {
                        return Err("Found duplicate base file information".into());
                    }
                    m.base = Some(f);
                }
                FileType::History => m.history.push(f),
                FileType::Incr => m.incrs.push(f),
            }
        }
        if !any {
            return Err("Found an empty AOF manifest".into());
        }
        Ok(m)
    }

    /// The manifest's text, as Redis writes it: base, history, incrs.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for f in self
            .base
            .iter()
            .chain(self.history.iter())
            .chain(self.incrs.iter())
        {
            s.push_str(&format!(
                "file {} seq {} type {}\n",
                quote(&f.name),
                f.seq,
                f.kind.letter()
            ));
        }
        s
    }

    /// The files loaded at start-up, in order: the base, then the incrs.
    pub fn load_order(&self) -> impl Iterator<Item = &AofFile> {
        self.base.iter().chain(self.incrs.iter())
    }
}

/// Where the AOF's files are for a configuration.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `dir`/`appenddirname`.
    pub dir: PathBuf,
    /// `dir` (where the single-file AOF of earlier versions is, and the
    /// rewrite's temp file).
    pub root: PathBuf,
    /// `appendfilename`: the stem of every file name.
    pub stem: String,
}

fn io(what: String, e: std::io::Error) -> String {
    format!("{what}: {}", error_text(&e))
}

/// Fsyncs a folder, so a rename or a new file in it survives a crash.
pub fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    let d = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(d)?.sync_all()
}

impl Layout {
    /// The layout the server's configuration names.
    pub fn of(server: &Server) -> Layout {
        let c = server.config.read();
        let root = PathBuf::from(&c.dir);
        Layout {
            dir: root.join(c.appenddirname()),
            root,
            stem: c.appendfilename.clone(),
        }
    }

    /// The manifest's path.
    pub fn manifest_path(&self) -> PathBuf {
        self.dir.join(format!("{}.manifest", self.stem))
    }

    /// A file of the folder by name.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The single-file AOF of Rostrum and Redis before 7.0.
    pub fn old_single_file(&self) -> PathBuf {
        self.root.join(&self.stem)
    }

    /// The name of base file `seq`.
    pub fn base_name(&self, seq: u64, rdb: bool) -> String {
        let ext = if rdb { "rdb" } else { "aof" };
        format!("{}.{seq}.base.{ext}", self.stem)
    }

    /// The name of incremental file `seq`.
    pub fn incr_name(&self, seq: u64) -> String {
        format!("{}.{seq}.incr.aof", self.stem)
    }

    /// The manifest on disk, `None` when there is none.
    pub fn read_manifest(&self) -> Result<Option<Manifest>, String> {
        let path = self.manifest_path();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                Manifest::parse(&text)
                    .map(Some)
                    .map_err(|e| format!("{e} ({})", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(
                format!("Can't open the AOF manifest {}", path.display()),
                e,
            )),
        }
    }

    /// Replaces the manifest atomically: a temp file, fsynced, renamed over
    /// it, the folder fsynced (so a crash leaves the old one or the new).
    pub fn write_manifest(&self, m: &Manifest) -> Result<(), String> {
        let path = self.manifest_path();
        let temp = self.dir.join(format!("temp-{}.manifest", self.stem));
        let r = (|| -> std::io::Result<()> {
            let mut f = File::create(&temp)?;
            f.write_all(m.render().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&temp, &path)?;
            fsync_dir(&self.dir)
        })();
        r.map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            io(
                format!("Error writing the AOF manifest {}", path.display()),
                e,
            )
        })
    }

    /// Creates the folder if it is missing.
    pub fn create_dir(&self) -> Result<(), String> {
        if self.dir.is_dir() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir)
            .and_then(|()| fsync_dir(&self.root))
            .map_err(|e| {
                io(
                    format!("Can't create the AOF directory {}", self.dir.display()),
                    e,
                )
            })
    }

    /// Redis 7's upgrade of a single-file AOF: when there is no manifest
    /// and `dir`/`appendfilename` exists, the file is moved into the folder
    /// unchanged as the base (seq 1, its name kept) and a manifest naming
    /// it written first (so a crash in between loses nothing: the manifest
    /// names a file not moved yet only until the rename, and the old name
    /// is checked again at the next start). Returns the manifest, if any.
    pub fn upgrade_or_read(&self) -> Result<Option<Manifest>, String> {
        if let Some(m) = self.read_manifest()? {
            // A crash between writing the manifest and the move.
            if let Some(b) = &m.base {
                let old = self.old_single_file();
                if b.name == self.stem && !self.file(&b.name).exists() && old.is_file() {
                    self.move_old(&old)?;
                }
            }
            return Ok(Some(m));
        }
        let old = self.old_single_file();
        if !old.is_file() {
            return Ok(None);
        }
        tracing::info!(
            "Creating AOF directory {} and upgrading {} (it becomes the base file)",
            self.dir.display(),
            old.display()
        );
        self.create_dir()?;
        let m = Manifest {
            base: Some(AofFile {
                name: self.stem.clone(),
                seq: 1,
                kind: FileType::Base,
            }),
            ..Manifest::default()
        };
        self.write_manifest(&m)?;
        self.move_old(&old)?;
        Ok(Some(m))
    }

    fn move_old(&self, old: &Path) -> Result<(), String> {
        let to = self.file(&self.stem);
        std::fs::rename(old, &to)
            .and_then(|()| fsync_dir(&self.dir))
            .and_then(|()| fsync_dir(&self.root))
            .map_err(|e| {
                io(
                    format!("Error moving {} to {}", old.display(), to.display()),
                    e,
                )
            })
    }

    /// Creates an empty file (or empties a leftover one), fsynced.
    pub fn create_file(&self, name: &str, contents: &[u8]) -> Result<File, String> {
        let path = self.file(name);
        let r = (|| -> std::io::Result<File> {
            let mut f = OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(&path)?;
            f.write_all(contents)?;
            f.sync_all()?;
            // Appends go at the end from now on.
            OpenOptions::new().append(true).open(&path)
        })();
        r.map_err(|e| io(format!("Can't create {}", path.display()), e))
    }

    /// The next incr's sequence number: one past every incr named.
    fn next_incr_seq(&self, m: &Manifest) -> u64 {
        let incr_suffix = ".incr.aof";
        m.incrs
            .iter()
            .chain(m.history.iter().filter(|f| f.name.ends_with(incr_suffix)))
            .map(|f| f.seq)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// The next base's sequence number.
    fn next_base_seq(&self, m: &Manifest) -> u64 {
        m.base
            .iter()
            .chain(m.history.iter().filter(|f| f.name.contains(".base.")))
            .map(|f| f.seq)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// At start-up, after loading: makes sure there is a base (an empty one
    /// for an empty data set, as Redis 7 writes) and an incr to append to,
    /// writes the manifest if it changed, and opens the last incr.
    /// Returns the file, its size, and the size of the files before it.
    pub fn open_for_append(
        &self,
        manifest: Option<Manifest>,
        empty_base: impl FnOnce(bool) -> Vec<u8>,
        rdb_base: bool,
    ) -> Result<(File, u64, u64), String> {
        self.create_dir()?;
        let mut m = manifest.unwrap_or_default();
        let mut changed = false;
        if m.base.is_none() && m.incrs.is_empty() {
            let seq = self.next_base_seq(&m);
            let name = self.base_name(seq, rdb_base);
            self.create_file(&name, &empty_base(rdb_base))?;
            m.base = Some(AofFile {
                name,
                seq,
                kind: FileType::Base,
            });
            changed = true;
        }
        if m.incrs.is_empty() {
            let seq = self.next_incr_seq(&m);
            let name = self.incr_name(seq);
            self.create_file(&name, b"")?;
            m.incrs.push(AofFile {
                name,
                seq,
                kind: FileType::Incr,
            });
            changed = true;
        }
        if changed {
            self.write_manifest(&m)?;
        }
        let mut before = 0;
        for f in m.base.iter().chain(m.incrs.iter()) {
            before += std::fs::metadata(self.file(&f.name))
                .map(|md| md.len())
                .unwrap_or(0);
        }
        let last = m.incrs.last().map(|f| f.name.clone()).unwrap_or_default();
        let path = self.file(&last);
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| {
                io(
                    format!("Can't open the append-only file {}", path.display()),
                    e,
                )
            })?;
        let size = f.metadata().map(|md| md.len()).unwrap_or(0);
        Ok((f, size, before.saturating_sub(size)))
    }

    /// Readies the swap after a rewrite, before the feed is stopped: creates
    /// the next incr (empty, fsynced) and writes the next manifest (base and
    /// that incr; the old ones history) to a temp file, fsynced with the
    /// folder. Only [`PreparedRewrite::commit`]'s renames are left for the
    /// moment writers wait.
    pub fn prepare_rewrite(&self, rdb_base: bool) -> Result<PreparedRewrite, String> {
        self.create_dir()?;
        let mut m = self.read_manifest()?.unwrap_or_default();
        let base_seq = self.next_base_seq(&m);
        let incr_seq = self.next_incr_seq(&m);
        let base_name = self.base_name(base_seq, rdb_base);
        let incr_name = self.incr_name(incr_seq);
        let incr_path = self.file(&incr_name);
        let incr = self.create_file(&incr_name, b"")?;
        if let Some(mut old) = m.base.take() {
            old.kind = FileType::History;
            m.history.push(old);
        }
        for mut old in std::mem::take(&mut m.incrs) {
            old.kind = FileType::History;
            m.history.push(old);
        }
        m.base = Some(AofFile {
            name: base_name.clone(),
            seq: base_seq,
            kind: FileType::Base,
        });
        m.incrs.push(AofFile {
            name: incr_name,
            seq: incr_seq,
            kind: FileType::Incr,
        });
        let manifest_temp = self.dir.join(format!("temp-{}.manifest", self.stem));
        let r = (|| -> std::io::Result<()> {
            let mut f = File::create(&manifest_temp)?;
            f.write_all(m.render().as_bytes())?;
            f.sync_all()?;
            // The new incr's and the temp manifest's names.
            fsync_dir(&self.dir)
        })();
        if let Err(e) = r {
            let _ = std::fs::remove_file(&manifest_temp);
            let _ = std::fs::remove_file(&incr_path);
            return Err(io(
                format!(
                    "Error writing the AOF manifest {}",
                    self.manifest_path().display()
                ),
                e,
            ));
        }
        Ok(PreparedRewrite {
            dir: self.dir.clone(),
            base_path: self.file(&base_name),
            manifest_path: self.manifest_path(),
            manifest_temp,
            incr_path,
            incr,
        })
    }

    /// Deletes the history files and drops them from the manifest (after
    /// a rewrite, as Redis does).
    pub fn delete_history(&self) -> Result<(), String> {
        let Some(mut m) = self.read_manifest()? else {
            return Ok(());
        };
        if m.history.is_empty() {
            return Ok(());
        }
        for f in &m.history {
            match std::fs::remove_file(self.file(&f.name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(io(
                        format!("Can't delete the history AOF file {}", f.name),
                        e,
                    ))
                }
            }
        }
        m.history.clear();
        self.write_manifest(&m)
    }
}

/// A rewrite's swap made ready by [`Layout::prepare_rewrite`].
pub struct PreparedRewrite {
    dir: PathBuf,
    base_path: PathBuf,
    manifest_path: PathBuf,
    manifest_temp: PathBuf,
    incr_path: PathBuf,
    incr: File,
}

impl PreparedRewrite {
    /// Moves the rewritten base (written and fsynced at `temp`) in and the
    /// new manifest over the old one, then fsyncs the folder: two renames
    /// and one fsync. Returns the new incr (empty, for the writer). A crash
    /// before the manifest's rename leaves the old manifest and files,
    /// whole; after it, the new base and incr, both fsynced.
    pub fn commit(self, temp: &Path) -> Result<File, String> {
        if let Err(e) = std::fs::rename(temp, &self.base_path) {
            let e = io(
                format!(
                    "Error renaming {} to {}",
                    temp.display(),
                    self.base_path.display()
                ),
                e,
            );
            self.abandon();
            return Err(e);
        }
        if let Err(e) = std::fs::rename(&self.manifest_temp, &self.manifest_path) {
            let e = io(
                format!(
                    "Error writing the AOF manifest {}",
                    self.manifest_path.display()
                ),
                e,
            );
            self.abandon();
            return Err(e);
        }
        // The manifest names the new files now, whatever this fsync says:
        // going back to the old ones would lose what is written next.
        if let Err(e) = fsync_dir(&self.dir) {
            tracing::warn!(
                "{}",
                io(format!("Error fsyncing {}", self.dir.display()), e)
            );
        }
        Ok(self.incr)
    }

    /// Removes what [`Layout::prepare_rewrite`] made (the rewrite failed).
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.manifest_temp);
        let _ = std::fs::remove_file(&self.incr_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_reads_and_writes_as_redis_7_0() {
        // As redis-server 7.0.15 wrote it after one BGREWRITEAOF.
        let text = "file appendonly.aof.2.base.rdb seq 2 type b\n\
                    file appendonly.aof.1.incr.aof seq 1 type h\n\
                    file appendonly.aof.2.incr.aof seq 2 type i\n";
        let m = Manifest::parse(text).expect("parse");
        assert_eq!(m.base.as_ref().map(|b| b.seq), Some(2));
        assert_eq!(m.history.len(), 1);
        assert_eq!(m.incrs[0].name, "appendonly.aof.2.incr.aof");
        assert_eq!(m.render(), text);
        let quoted = Manifest::parse("# c\nfile \"my file\" seq 1 type b\n").expect("parse");
        assert_eq!(
            quoted.base.as_ref().map(|b| b.name.as_str()),
            Some("my file")
        );
        assert_eq!(quoted.render(), "file \"my file\" seq 1 type b\n");
        for bad in [
            "",
            "file a seq 1 type b",
            "file a seq 1\n",
            "file a seq 1 type x\n",
            "file a seq 1 type b\nfile c seq 2 type b\n",
        ] {
            assert!(Manifest::parse(bad).is_err(), "{bad:?}");
        }
    }
}
