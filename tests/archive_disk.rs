//! Closed periods on disk (issue 17, `ARCHIVE DISK`) through the redis
//! crate against a spawned Rostrum: a model test (the same random boards,
//! one ARCHIVE MEMORY and one ARCHIVE DISK, every read command with many
//! argument combinations must answer alike), restarts through the AOF
//! (plain and rewritten, which refers to the files) and through an RDB
//! file, a corrupted file reported and isolated, and the files deleted
//! with their period (HISTORY) or board (DEL, overwrite, FLUSHALL), kept
//! apart by DUMP/RESTORE and COPY.
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{cmd, err, q, temp_dir, TestServer};
use redis::{Connection, Value};

/// Removes a test's data folder when the test ends.
struct DataDir(PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The archive files in `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir.join("lb-archives")) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "lba"))
        .collect();
    v.sort();
    v
}

/// The `location` of each period of LB.PERIODS, current first.
fn locations(c: &mut Connection, key: &str) -> Vec<String> {
    let v: Value = cmd(&["LB.PERIODS", key]).query(c).expect("LB.PERIODS");
    let Value::Array(list) = v else {
        panic!("LB.PERIODS answered {v:?}")
    };
    list.iter()
        .map(|p| {
            let Value::Array(f) = p else { panic!("{p:?}") };
            common::show(&f[9])
        })
        .collect()
}

/// A reply, or its error line, as text.
fn answer(c: &mut Connection, args: &[String]) -> String {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    match cmd(&refs).query::<Value>(c) {
        Ok(v) => common::show(&v),
        Err(e) => format!("error: {e}"),
    }
}

/// Fills boards `keys` with the same random entries (ties in score and
/// subscore, metadata on some), the same times.
fn fill(c: &mut Connection, keys: &[&str], rng: &mut Rng, n: u64, members: u64) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        let m = format!("m{}", rng.below(members));
        let score = rng.below(40) as i64 - 10;
        let sub = rng.below(3).to_string();
        let at = (1_000 + i).to_string();
        let meta = (rng.below(4) == 0).then(|| format!("meta-{i}"));
        for k in keys {
            let mut args = vec![
                "LB.SUBMIT".to_string(),
                k.to_string(),
                m.clone(),
                score.to_string(),
                "SUBSCORE".into(),
                sub.clone(),
                "AT".into(),
                at.clone(),
            ];
            if let Some(meta) = &meta {
                args.push("META".into());
                args.push(meta.clone());
            }
            let mut one = redis::cmd(&args[0]);
            for a in &args[1..] {
                one.arg(a);
            }
            pipe.add_command(one).ignore();
        }
    }
    pipe.query::<()>(c).expect("fill");
}

/// Read commands on `key`'s period `back` with many argument
/// combinations (`set`: a set of members for LB.FRIENDS).
fn reads(key: &str, back: &str, rng: &mut Rng, members: u64, set: &str) -> Vec<Vec<String>> {
    let s = |x: &str| x.to_string();
    let member = |rng: &mut Rng| format!("m{}", rng.below(members + members / 5));
    let withs = [
        vec![],
        vec![s("WITHSUBSCORE")],
        vec![s("WITHTIME"), s("WITHMETA")],
        vec![s("WITHSUBSCORE"), s("WITHTIME"), s("WITHMETA")],
    ];
    let mut out = Vec::new();
    let period = [s("PERIOD"), s(back)];
    for _ in 0..40 {
        let m = member(rng);
        for name in ["LB.GET", "LB.SCORE", "LB.RANK", "LB.PERCENT"] {
            let mut a = vec![s(name), s(key), m.clone()];
            a.extend(period.clone());
            out.push(a);
        }
        let mut a = vec![s("LB.MRANK"), s(key)];
        for _ in 0..1 + rng.below(6) {
            a.push(member(rng));
        }
        a.extend(period.clone());
        out.push(a);
        let w = withs[rng.below(4) as usize].clone();
        let mut a = vec![
            s("LB.TOP"),
            s(key),
            rng.below(300).to_string(),
            s("OFFSET"),
            rng.below(members + 10).to_string(),
        ];
        a.extend(w.clone());
        a.extend(period.clone());
        out.push(a);
        let mut a = vec![
            s("LB.TOP"),
            s(key),
            s("PERCENT"),
            (rng.below(1000) as f64 / 10.0).to_string(),
        ];
        a.extend(period.clone());
        out.push(a);
        let (x, y) = (
            rng.below(2 * members) as i64 - members as i64,
            rng.below(2 * members) as i64 - members as i64,
        );
        let mut a = vec![s("LB.RANGE"), s(key), x.to_string(), y.to_string()];
        a.extend(w.clone());
        a.extend(period.clone());
        out.push(a);
        let mut a = vec![
            s("LB.AROUND"),
            s(key),
            member(rng),
            rng.below(30).to_string(),
        ];
        a.extend(w.clone());
        a.extend(period.clone());
        out.push(a);
        let mut a = vec![s("LB.AMONG"), s(key)];
        for _ in 0..1 + rng.below(12) {
            a.push(member(rng));
        }
        a.extend(w.clone());
        if rng.below(2) == 0 {
            a.push(s("WITHGLOBAL"));
        }
        a.extend(period.clone());
        out.push(a);
        let mut a = vec![s("LB.FRIENDS"), s(key), s(set), s("INCLUDE"), member(rng)];
        a.extend(w.clone());
        a.push(s("WITHGLOBAL"));
        a.extend(period.clone());
        out.push(a);
        let (lo, hi) = (rng.below(50) as i64 - 15, rng.below(50) as i64 - 15);
        let mut a = vec![s("LB.COUNT"), s(key), lo.to_string(), hi.to_string()];
        a.extend(period.clone());
        out.push(a);
    }
    let mut a = vec![s("LB.COUNT"), s(key)];
    a.extend(period.clone());
    out.push(a);
    let mut a = vec![s("LB.RANGE"), s(key), s("1"), s("-1"), s("WITHMETA")];
    a.extend(period);
    out.push(a);
    out
}

/// Every read of `disk`'s period `back` answers as `memory`'s.
fn compare(c: &mut Connection, memory: &str, disk: &str, back: &str, seed: u64, members: u64) {
    let set = format!("{disk}:friends");
    let mut r1 = Rng(seed);
    let mut r2 = Rng(seed);
    let a = reads(memory, back, &mut r1, members, &set);
    let b = reads(disk, back, &mut r2, members, &set);
    let mut checked = 0;
    for (x, y) in a.iter().zip(&b) {
        let (ax, ay) = (answer(c, x), answer(c, y));
        assert_eq!(ax, ay, "{x:?} vs {y:?}");
        assert!(!ay.starts_with("error"), "{y:?}: {ay}");
        checked += 1;
    }
    assert!(checked > 400);
}

#[test]
fn disk_archives_answer_as_memory_archives() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut rng = Rng(0x5eed_1234_abcd);
    let combos = [
        ("DESC", "ORDINAL"),
        ("DESC", "COMPETITION"),
        ("ASC", "DENSE"),
        ("ASC", "COMPETITION"),
        ("DESC", "DENSE"),
    ];
    for (i, (order, ranking)) in combos.iter().enumerate() {
        let (m, d) = (format!("mem{i}"), format!("disk{i}"));
        for (k, archive) in [(&m, "MEMORY"), (&d, "DISK")] {
            q(
                &mut c,
                &[
                    "LB.CREATE",
                    k,
                    "ORDER",
                    order,
                    "RANKING",
                    ranking,
                    "POLICY",
                    "SET",
                    "RESET",
                    "DAILY",
                    "HISTORY",
                    "3",
                    "ARCHIVE",
                    archive,
                ],
            );
        }
        // Sizes around the index's block of 256 entries.
        let members = [700u64, 255, 256, 1, 1300][i];
        fill(&mut c, &[&m, &d], &mut rng, members * 2, members);
        for k in [&m, &d] {
            q(&mut c, &["LB.RESET", k]);
        }
        // A second closed period, and entries in the current one.
        fill(&mut c, &[&m, &d], &mut rng, 50, 40);
        for k in [&m, &d] {
            q(&mut c, &["LB.RESET", k]);
        }
        fill(&mut c, &[&m, &d], &mut rng, 20, 40);
        let mut friends = vec!["SADD".to_string(), format!("{d}:friends")];
        for j in 0..30 {
            friends.push(format!("m{}", (j * 37) % (members + 5)));
        }
        answer(&mut c, &friends);
        friends[1] = format!("{m}:friends");
        answer(&mut c, &friends);
        assert_eq!(locations(&mut c, &d), ["memory", "disk", "disk"]);
        assert_eq!(locations(&mut c, &m), ["memory", "memory", "memory"]);
        compare(&mut c, &m, &d, "-2", 100 + i as u64, members);
        compare(&mut c, &m, &d, "-1", 200 + i as u64, 40);
        compare(&mut c, &m, &d, "0", 300 + i as u64, 40);
    }
    assert_eq!(files(&srv.dir).len(), 10);
    let info = common::info(&mut c, "leaderboards");
    assert_eq!(info["lb_periods_on_disk"], "10");
    let bytes: u64 = info["lb_bytes_on_disk"].parse().expect("bytes");
    let on_disk: u64 = files(&srv.dir)
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    assert_eq!(bytes, on_disk);
    // Archives are read-only; the board's options are the same.
    assert_eq!(
        q(&mut c, &["LB.CONFIG", "disk0", "GET"]).split(' ').nth(7),
        Some("DISK")
    );
}

fn wait_rewrite(c: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = common::info(c, "persistence");
        if info["aof_rewrite_in_progress"] == "0" && info["aof_rewrite_scheduled"] == "0" {
            return;
        }
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two boards alike, `m` in memory and `d` on disk, with two closed
/// periods.
fn two_boards(c: &mut Connection) {
    let mut rng = Rng(77);
    for (k, a) in [("m", "MEMORY"), ("d", "DISK")] {
        q(
            c,
            &[
                "LB.CREATE",
                k,
                "RANKING",
                "COMPETITION",
                "RESET",
                "WEEKLY",
                "HISTORY",
                "5",
                "ARCHIVE",
                a,
            ],
        );
    }
    fill(c, &["m", "d"], &mut rng, 600, 400);
    q(c, &["LB.RESET", "m"]);
    q(c, &["LB.RESET", "d"]);
    fill(c, &["m", "d"], &mut rng, 300, 300);
    q(c, &["LB.RESET", "m"]);
    q(c, &["LB.RESET", "d"]);
    fill(c, &["m", "d"], &mut rng, 10, 10);
}

#[test]
fn disk_archives_survive_restarts_through_the_aof_and_rdb() {
    let dir = DataDir(temp_dir("lb-archive-aof"));
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    two_boards(&mut c);
    let before = files(&dir.0);
    assert_eq!(before.len(), 2);
    // A plain AOF: the resets are replayed (the files written again).
    srv.terminate();
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(locations(&mut c, "d"), ["memory", "disk", "disk"]);
    compare(&mut c, "m", "d", "-1", 1, 300);
    compare(&mut c, "m", "d", "-2", 2, 400);
    assert_eq!(files(&dir.0).len(), 2, "the old copies are deleted");
    // A rewritten AOF refers to the files.
    q(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite(&mut c);
    let kept = files(&dir.0);
    let aof = common::aof_bytes(&dir.0);
    let text = String::from_utf8_lossy(&aof);
    assert_eq!(text.matches("LB.ATTACH").count(), 2);
    for f in &kept {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        assert!(text.contains(&name), "{name} not in the AOF");
    }
    srv.terminate();
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(files(&dir.0), kept, "the files are used as they are");
    compare(&mut c, "m", "d", "-1", 3, 300);
    compare(&mut c, "m", "d", "-2", 4, 400);
    assert!(err(
        &mut c,
        &["LB.ATTACH", "d", "AT", "1", "FILE", "x.lba", "CRC", "0"]
    )
    .contains("only read from the AOF"));
    srv.terminate();

    // RDB: SAVE carries the periods whole; a restart writes them again.
    let dir = DataDir(temp_dir("lb-archive-rdb"));
    let d = dir.0.to_str().expect("utf-8").to_string();
    let mut srv = TestServer::start(&["--dir", &d, "--appendonly", "no", "--save", ""]);
    let mut c = srv.conn();
    two_boards(&mut c);
    assert_eq!(q(&mut c, &["SAVE"]), "OK");
    srv.terminate();
    let mut srv = TestServer::start(&["--dir", &d, "--appendonly", "no", "--save", ""]);
    let mut c = srv.conn();
    assert_eq!(locations(&mut c, "d"), ["memory", "disk", "disk"]);
    compare(&mut c, "m", "d", "-1", 5, 300);
    compare(&mut c, "m", "d", "-2", 6, 400);
    assert_eq!(files(&dir.0).len(), 2);
    srv.terminate();
}

/// With `aof-use-rdb-preamble yes` (the default) the rewritten base is an
/// RDB file whose boards name their period files, with their checksums,
/// instead of copying them: a restart opens the same files and answers
/// the same.
#[test]
fn an_rdb_preamble_refers_to_the_files() {
    let dir = DataDir(temp_dir("lb-archive-preamble"));
    let d = dir.0.to_str().expect("utf-8").to_string();
    let args = [
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        "yes",
        "--dir",
        &d,
    ];
    let mut srv = TestServer::start(&args);
    let mut c = srv.conn();
    two_boards(&mut c);
    q(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite(&mut c);
    let kept = files(&dir.0);
    assert_eq!(kept.len(), 2);
    let base = common::aof_files(&dir.0);
    let base = base.first().expect("a base file");
    assert!(
        base.to_string_lossy().ends_with(".base.rdb"),
        "{}",
        base.display()
    );
    let bytes = std::fs::read(base).expect("base");
    for f in &kept {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        let found = bytes.windows(name.len()).any(|w| w == name.as_bytes());
        assert!(found, "{name} not named in the base");
    }
    srv.terminate();
    let mut srv = TestServer::start(&args);
    let mut c = srv.conn();
    assert_eq!(files(&dir.0), kept, "the files are used as they are");
    assert_eq!(locations(&mut c, "d"), ["memory", "disk", "disk"]);
    compare(&mut c, "m", "d", "-1", 7, 300);
    compare(&mut c, "m", "d", "-2", 8, 400);
    srv.terminate();
}

#[test]
fn a_corrupt_archive_is_reported_and_isolated() {
    let dir = DataDir(temp_dir("lb-archive-bad"));
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    two_boards(&mut c);
    q(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite(&mut c);
    srv.terminate();
    // Flip one byte in the older period's file, remove nothing else.
    let fs = files(&dir.0);
    let older = fs
        .iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("p1-"))
        })
        .expect("period 1's file")
        .clone();
    let mut bytes = std::fs::read(&older).expect("read");
    let at = bytes.len() / 3;
    bytes[at] ^= 0x55;
    std::fs::write(&older, &bytes).expect("write");
    let name = older
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(locations(&mut c, "d"), ["memory", "disk", "unavailable"]);
    let e = err(&mut c, &["LB.TOP", "d", "3", "PERIOD", "-2"]);
    assert!(e.contains("unavailable") && e.contains(&name), "{e}");
    // The rest is served: the other period, the current one, the other board.
    compare(&mut c, "m", "d", "-1", 7, 300);
    compare(&mut c, "m", "d", "0", 8, 10);
    // The file stays for inspection while the period is kept.
    assert!(older.exists());
    // A restart after another rewrite still reports it.
    q(&mut c, &["BGREWRITEAOF"]);
    wait_rewrite(&mut c);
    srv.terminate();
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(locations(&mut c, "d"), ["memory", "disk", "unavailable"]);
    // Missing: the same.
    std::fs::remove_file(&older).expect("remove");
    srv.terminate();
    let mut srv = TestServer::start_with_aof(&dir.0);
    let mut c = srv.conn();
    assert_eq!(locations(&mut c, "d"), ["memory", "disk", "unavailable"]);
    let e = err(&mut c, &["LB.RANK", "d", "m1", "PERIOD", "-2"]);
    assert!(e.contains(&name), "{e}");
    srv.terminate();
}

#[test]
fn archive_files_go_with_their_period_and_board() {
    let srv = TestServer::start(&[]);
    let mut c = srv.conn();
    let mut rng = Rng(9);
    q(
        &mut c,
        &[
            "LB.CREATE",
            "d",
            "RESET",
            "DAILY",
            "HISTORY",
            "2",
            "ARCHIVE",
            "DISK",
        ],
    );
    for _ in 0..4 {
        fill(&mut c, &["d"], &mut rng, 100, 50);
        q(&mut c, &["LB.RESET", "d"]);
    }
    assert_eq!(files(&srv.dir).len(), 2, "HISTORY 2 keeps two files");
    q(&mut c, &["LB.CONFIG", "d", "SET", "HISTORY", "1"]);
    assert_eq!(files(&srv.dir).len(), 1);
    // DUMP carries the period; RESTORE writes a file of its own.
    let dump: Vec<u8> = cmd(&["DUMP", "d"]).query(&mut c).expect("dump");
    let top = q(&mut c, &["LB.TOP", "d", "10", "PERIOD", "-1", "WITHMETA"]);
    redis::cmd("RESTORE")
        .arg("r")
        .arg(0)
        .arg(dump)
        .query::<()>(&mut c)
        .expect("restore");
    assert_eq!(files(&srv.dir).len(), 2);
    // COPY shares the file.
    q(&mut c, &["COPY", "d", "c"]);
    assert_eq!(files(&srv.dir).len(), 2);
    q(&mut c, &["DEL", "d"]);
    assert_eq!(files(&srv.dir).len(), 2, "the copy still refers to it");
    assert_eq!(
        q(&mut c, &["LB.TOP", "c", "10", "PERIOD", "-1", "WITHMETA"]),
        top
    );
    assert_eq!(
        q(&mut c, &["LB.TOP", "r", "10", "PERIOD", "-1", "WITHMETA"]),
        top
    );
    // RENAME and MOVE leave the files alone.
    q(&mut c, &["RENAME", "c", "c2"]);
    q(&mut c, &["MOVE", "c2", "3"]);
    q(&mut c, &["SELECT", "3"]);
    assert_eq!(
        q(&mut c, &["LB.TOP", "c2", "10", "PERIOD", "-1", "WITHMETA"]),
        top
    );
    q(&mut c, &["SET", "c2", "overwritten"]);
    q(&mut c, &["SELECT", "0"]);
    assert_eq!(files(&srv.dir).len(), 1);
    // Back to memory: the file is read in and deleted.
    q(&mut c, &["LB.CONFIG", "r", "SET", "ARCHIVE", "MEMORY"]);
    assert_eq!(files(&srv.dir).len(), 0);
    assert_eq!(locations(&mut c, "r"), ["memory", "memory"]);
    assert_eq!(
        q(&mut c, &["LB.TOP", "r", "10", "PERIOD", "-1", "WITHMETA"]),
        top
    );
    q(&mut c, &["LB.CONFIG", "r", "SET", "ARCHIVE", "DISK"]);
    assert_eq!(files(&srv.dir).len(), 1);
    q(&mut c, &["FLUSHALL"]);
    assert_eq!(files(&srv.dir).len(), 0);
    let info = common::info(&mut c, "leaderboards");
    assert_eq!(info["lb_periods_on_disk"], "0");
}
