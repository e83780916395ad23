//! The five leaderboard scenarios (shared/scenarios.md) a second time, each
//! written with LB.* beside the Redis recipe it replaces (tests/scenarios.rs
//! holds the recipe alone): the same workload goes to both on one server,
//! and the LB board must give the same answers — with no score packing, the
//! friends board in one call and the vote tally made idempotent by `ID`.
//! Where the recipe's order between equal packed scores is an accident of
//! member bytes, the LB board is checked against a model of its own rule
//! (score, then the time it was reached, then member bytes).
mod common;

use std::collections::{HashMap, HashSet};
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use redis::{Commands, Connection};

use common::{temp_dir, TestServer};

/// An entry reply: `[rank, member, score]`.
type Entry = (i64, String, i64);

/// An LB.SUBMIT / LB.INCR reply: `[score, rank, changed]`.
type Write = (i64, i64, i64);

/// An LB.* command with its arguments: `lb!("LB.TOP", key, 10)`.
macro_rules! lb {
    ($name:expr $(, $arg:expr)* $(,)?) => {{
        let mut cmd = redis::cmd($name);
        $(cmd.arg($arg);)*
        cmd
    }};
}

/// A DESC, EARLIEST board as the engine must order it: score high to low,
/// then the time the score was reached (earlier first), then member bytes.
#[derive(Default, Clone)]
struct Model {
    entries: HashMap<String, (i64, u64)>,
}

impl Model {
    /// POLICY BEST: stored when new or strictly better; tells whether it
    /// changed.
    fn best(&mut self, member: &str, score: i64, at: u64) -> bool {
        match self.entries.get(member) {
            Some((old, _)) if *old >= score => false,
            _ => {
                self.entries.insert(member.to_string(), (score, at));
                true
            }
        }
    }

    fn incr(&mut self, member: &str, delta: i64, at: u64) -> i64 {
        let e = self.entries.entry(member.to_string()).or_insert((0, at));
        e.0 += delta;
        e.1 = at;
        e.0
    }

    fn ranked(&self) -> Vec<Entry> {
        let mut v: Vec<(&String, &(i64, u64))> = self.entries.iter().collect();
        v.sort_by(|a, b| {
            b.1 .0
                .cmp(&a.1 .0)
                .then(a.1 .1.cmp(&b.1 .1))
                .then(a.0.cmp(b.0))
        });
        v.into_iter()
            .enumerate()
            .map(|(i, (m, (s, _)))| (i as i64 + 1, m.clone(), *s))
            .collect()
    }
}

/// ZREVRANGE key 0 -1 WITHSCORES as (member, score) with integral scores.
fn zboard(c: &mut Connection, key: &str) -> Vec<(String, i64)> {
    let v: Vec<(String, f64)> = c.zrevrange_withscores(key, 0, -1).expect("ZREVRANGE");
    v.into_iter().map(|(m, s)| (m, s as i64)).collect()
}

fn lb_all(c: &mut Connection, key: &str) -> Vec<Entry> {
    lb!("LB.RANGE", &key, &1, &-1).query(c).expect("LB.RANGE")
}

fn scores(entries: &[Entry]) -> HashMap<String, i64> {
    entries.iter().map(|(_, m, s)| (m.clone(), *s)).collect()
}

fn vanishes(c: &mut Connection, key: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let exists: bool = c.exists(key).expect("EXISTS");
        if !exists {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    false
}

// ---------------------------------------------------------------------------
// Scenario 1: daily steps; the friends board in one call.

#[test]
fn scenario1_lb_daily_steps_and_friends_in_one_call() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let mut rng = StdRng::seed_from_u64(20250415);
    let users = 2000u32;
    let mut models: HashMap<String, Model> = HashMap::new();
    let mut clock = 1_744_675_200_000u64; // the uploads' own times, in ms
    for day in ["20250414", "20250415"] {
        let zkey = format!("step_rank:{day}");
        let lkey = format!("lb:steps:{day}");
        let ok: String = lb!("LB.CREATE", &lkey, &"ORDER", &"DESC", &"POLICY", &"BEST")
            .query(&mut c)
            .expect("LB.CREATE");
        assert_eq!(ok, "OK");
        let mut uploads: Vec<(String, i64)> = Vec::new();
        for uid in 1..=users {
            for _ in 0..rng.random_range(0..=3) {
                uploads.push((format!("user:{uid}"), rng.random_range(0..40_000)));
            }
        }
        uploads.shuffle(&mut rng);
        let model = models.entry(lkey.clone()).or_default();
        for batch in uploads.chunks(400) {
            // The recipe: one ZADD GT CH per upload (the phone's total).
            let mut zpipe = redis::pipe();
            zpipe.atomic();
            // LB: the same uploads, each stamped with its upload time.
            let mut lpipe = redis::pipe();
            lpipe.atomic();
            let mut expected = Vec::new();
            for (member, steps) in batch {
                clock += 1;
                zpipe
                    .cmd("ZADD")
                    .arg(&zkey)
                    .arg("GT")
                    .arg("CH")
                    .arg(steps)
                    .arg(member);
                lpipe
                    .cmd("LB.SUBMIT")
                    .arg(&lkey)
                    .arg(member)
                    .arg(steps)
                    .arg("AT")
                    .arg(clock);
                let changed = model.best(member, *steps, clock);
                expected.push((model.entries[member].0, i64::from(changed)));
            }
            zpipe.expire(&zkey, 3 * 86400).ignore();
            lpipe.expire(&lkey, 3 * 86400).ignore();
            let zch: Vec<i64> = zpipe.query(&mut c).expect("ZADD burst");
            let lrep: Vec<(i64, i64, i64)> = lpipe.query(&mut c).expect("LB burst");
            let got: Vec<(i64, i64)> = lrep.iter().map(|r| (r.0, r.2)).collect();
            assert_eq!(got, expected, "{lkey}: scores and changed flags");
            let lch: Vec<i64> = lrep.iter().map(|r| r.2).collect();
            assert_eq!(zch, lch, "{lkey}: LB changed = ZADD GT CH");
            assert!(lrep.iter().all(|r| r.1 >= 1), "{lkey}: ranks");
        }
        let ranked = model.ranked();
        let top: Vec<Entry> = lb!("LB.TOP", &lkey, &10).query(&mut c).expect("TOP");
        assert_eq!(top, ranked[..10].to_vec(), "{lkey}: top 10");
        let whole = lb_all(&mut c, &lkey);
        assert_eq!(whole, ranked, "{lkey}: the whole board");
        let recipe: HashMap<String, i64> = zboard(&mut c, &zkey).into_iter().collect();
        assert_eq!(scores(&whole), recipe, "{lkey}: same scores as the recipe");
        let zcard: usize = c.zcard(&zkey).expect("ZCARD");
        let count: usize = lb!("LB.COUNT", &lkey).query(&mut c).expect("COUNT");
        assert_eq!(count, zcard);
    }

    // Friends of user:1001: the recipe's SMEMBERS + ZMSCORE + sort in the
    // app, against one LB.FRIENDS with the player included and global
    // places.
    let (zkey, lkey) = ("step_rank:20250415", "lb:steps:20250415");
    let friends: Vec<String> = (1..users + 300)
        .collect::<Vec<u32>>()
        .choose_multiple(&mut rng, 300)
        .map(|id| format!("user:{id}"))
        .collect();
    let _: usize = c.sadd("friends:1001", &friends).expect("SADD");
    let listed: Vec<String> = c.smembers("friends:1001").expect("SMEMBERS");
    let mut asked = listed.clone();
    asked.push("user:1001".into());
    let zs: Vec<Option<f64>> = redis::cmd("ZMSCORE")
        .arg(zkey)
        .arg(&asked)
        .query(&mut c)
        .expect("ZMSCORE");
    let mut by_hand: Vec<(String, i64)> = asked
        .iter()
        .zip(zs)
        .filter_map(|(m, s)| s.map(|s| (m.clone(), s as i64)))
        .collect();
    by_hand.sort_by_key(|e| std::cmp::Reverse(e.1));
    let board = models[lkey].ranked();
    let global: HashMap<&str, i64> = board.iter().map(|(r, m, _)| (m.as_str(), *r)).collect();
    let wanted: HashSet<&str> = asked.iter().map(String::as_str).collect();
    let expected: Vec<(i64, String, i64, i64)> = board
        .iter()
        .filter(|(_, m, _)| wanted.contains(m.as_str()))
        .enumerate()
        .map(|(i, (_, m, s))| (i as i64 + 1, m.clone(), *s, global[m.as_str()]))
        .collect();
    let got: Vec<(i64, String, i64, i64)> = lb!(
        "LB.FRIENDS",
        &lkey,
        &"friends:1001",
        &"INCLUDE",
        &"user:1001",
        &"WITHGLOBAL"
    )
    .query(&mut c)
    .expect("LB.FRIENDS");
    assert_eq!(got, expected, "LB.FRIENDS");
    let got_scores: Vec<i64> = got.iter().map(|e| e.2).collect();
    let hand_scores: Vec<i64> = by_hand.iter().map(|e| e.1).collect();
    assert_eq!(got_scores, hand_scores, "same friends board as the recipe");
    let got_members: HashSet<&str> = got.iter().map(|e| e.1.as_str()).collect();
    let hand_members: HashSet<&str> = by_hand.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(got_members, hand_members);
    // The window around the player, in one call.
    let me = got.iter().find(|e| e.1 == "user:1001").map(|e| e.3);
    if let Some(place) = me {
        let around: Vec<Entry> = lb!("LB.AROUND", &lkey, &"user:1001", &5)
            .query(&mut c)
            .expect("AROUND");
        assert!(around.iter().any(|e| e.0 == place && e.1 == "user:1001"));
    }

    // Hot and cold: yesterday's board leaves memory like the recipe's.
    let old = "lb:steps:20250414";
    let set: bool = c.expire(old, 1).expect("EXPIRE");
    assert!(set);
    assert!(vanishes(&mut c, old), "{old} is still there");
    let ty: String = redis::cmd("TYPE").arg(lkey).query(&mut c).expect("TYPE");
    assert_eq!(ty, "leaderboard");
}

// ---------------------------------------------------------------------------
// Scenario 2: power ranking; ties by time with no packing.

const BASE: f64 = 317242022400.0;

fn power_boards(c: &mut Connection, rng: &mut StdRng, n: usize, zkey: &str, lkey: &str) {
    let powers: Vec<i64> = (0..n / 4)
        .map(|_| rng.random_range(1_000_000..2_000_000))
        .collect();
    let mut times = HashSet::new();
    let mut model = Model::default();
    let mut zpipe = redis::pipe();
    let mut lpipe = redis::pipe();
    let mut first_t: HashMap<String, i64> = HashMap::new();
    for pid in 1..=n {
        let member = format!("player:{pid}");
        let power = if rng.random::<f64>() < 0.5 {
            *powers.choose(rng).expect("powers")
        } else {
            rng.random_range(1_000_000..2_000_000)
        };
        // Distinct seconds, so the recipe's order never falls back to
        // member bytes (where the two rules differ by design).
        let t = loop {
            let t = rng.random_range(1_700_000_000i64..1_760_000_000);
            if times.insert(t) {
                break t;
            }
        };
        first_t.insert(member.clone(), t);
        let packed = power as f64 + (BASE - t as f64) / BASE;
        zpipe.zadd(zkey, &member, packed).ignore();
        lpipe
            .cmd("LB.SUBMIT")
            .arg(lkey)
            .arg(&member)
            .arg(power)
            .arg("AT")
            .arg(t * 1000)
            .ignore();
        model.best(&member, power, t as u64 * 1000);
    }
    let _: () = zpipe.query(c).expect("ZADD");
    let _: () = lpipe.query(c).expect("LB.SUBMIT");

    let same_order = |c: &mut Connection, model: &Model| {
        let z: Vec<String> = zboard(c, zkey).into_iter().map(|(m, _)| m).collect();
        let l = lb_all(c, lkey);
        assert_eq!(l, model.ranked(), "{lkey}: the model's order");
        let lm: Vec<String> = l.iter().map(|e| e.1.clone()).collect();
        assert_eq!(lm, z, "{lkey}: the recipe's order");
        // Power is the integer part of the packed score.
        let zs: Vec<i64> = zboard(c, zkey).into_iter().map(|(_, s)| s).collect();
        let ls: Vec<i64> = l.iter().map(|e| e.2).collect();
        assert_eq!(ls, zs, "{lkey}: powers");
    };
    same_order(c, &model);

    let top3: Vec<Entry> = lb!("LB.TOP", &lkey, &3).query(c).expect("TOP");
    assert_eq!(top3, model.ranked()[..3].to_vec());
    let names: Vec<String> = model.ranked().into_iter().map(|e| e.1).collect();
    for member in names.choose_multiple(rng, 20) {
        let zr: Option<i64> = c.zrevrank(zkey, member).expect("ZREVRANK");
        let lr: Option<i64> = lb!("LB.RANK", &lkey, member).query(c).expect("RANK");
        assert_eq!(lr, zr.map(|r| r + 1), "LB.RANK = ZREVRANK + 1 for {member}");
    }
    // Power gained in a fight: the time it was first reached stays (AT the
    // original time), as ZINCRBY keeps the packed fraction.
    for member in names.choose_multiple(rng, 10) {
        let delta = rng.random_range(1..50_000i64);
        let z: f64 = c.zincr(zkey, member, delta).expect("ZINCRBY");
        let at = first_t[member] * 1000;
        let (score, _, changed): (i64, i64, i64) =
            lb!("LB.INCR", &lkey, member, &delta, &"AT", &at)
                .query(c)
                .expect("LB.INCR");
        assert_eq!((score, changed), (z as i64, 1));
        model.incr(member, delta, at as u64);
    }
    // A new record re-stamps the time.
    let member = names.last().expect("players");
    let t = 1_760_000_100i64;
    let record = model.entries[member].0 + 1_000_000;
    let _: i64 = redis::cmd("ZADD")
        .arg(zkey)
        .arg("XX")
        .arg("CH")
        .arg(record as f64 + (BASE - t as f64) / BASE)
        .arg(member)
        .query(c)
        .expect("ZADD XX");
    let (_, rank, changed): (i64, i64, i64) =
        lb!("LB.SUBMIT", &lkey, member, &record, &"AT", &(t * 1000))
            .query(c)
            .expect("SUBMIT");
    assert_eq!(changed, 1);
    model.best(member, record, t as u64 * 1000);
    let zr: Option<i64> = c.zrevrank(zkey, member).expect("ZREVRANK");
    assert_eq!(Some(rank), zr.map(|r| r + 1));
    same_order(c, &model);
}

#[test]
fn scenario2_lb_power_ranking_ties_by_time_without_packing() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let mut rng = StdRng::seed_from_u64(339);
    power_boards(&mut c, &mut rng, 300, "leaderboard:339", "lb:power:339");
    power_boards(&mut c, &mut rng, 60, "leaderboard:340", "lb:power:340");
    let none: Option<i64> = lb!("LB.RANK", &"lb:power:339", &"player:none")
        .query(&mut c)
        .expect("RANK");
    assert_eq!(none, None);
    // An equal power reached later ranks lower, at full precision, with
    // times far past the packed recipe's reach.
    for (m, at) in [("late", 4_102_444_800_000u64), ("early", 4_102_444_799_999)] {
        let _: (i64, i64, i64) = lb!("LB.SUBMIT", &"lb:ties", &m, &7, &"AT", &at)
            .query(&mut c)
            .expect("SUBMIT");
    }
    let order: Vec<Entry> = lb!("LB.TOP", &"lb:ties", &2).query(&mut c).expect("TOP");
    assert_eq!(
        order,
        vec![(1, "early".into(), 7), (2, "late".into(), 7)],
        "1 ms apart, in the year 2100"
    );
}

// ---------------------------------------------------------------------------
// Scenario 3: likes, comments, points; idempotent consumers without SET NX.

#[test]
fn scenario3_lb_content_boards_idempotent_by_event_id() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let mut rng = StdRng::seed_from_u64(42);
    let mut events: Vec<(String, &str, String, i64)> = Vec::new();
    for seq in 0..3000 {
        let article = format!("article:{}", rng.random_range(1..=200));
        let (board, delta) = match rng.random_range(0..4) {
            0 | 1 => ("likes", if rng.random::<f64>() < 0.8 { 1 } else { -1 }),
            2 => ("comments", 1),
            _ => ("points", rng.random_range(1..=10)),
        };
        let id = format!("{article}:{board}:{}", 1_744_700_000 + seq);
        events.push((id, board, article, delta));
    }
    let resent: Vec<_> = events.choose_multiple(&mut rng, 600).cloned().collect();
    for e in resent {
        let at = rng.random_range(0..=events.len());
        events.insert(at, e);
    }

    let mut totals: HashMap<&str, HashMap<String, i64>> = HashMap::new();
    let mut seen = HashSet::new();
    for batch in events.chunks(200) {
        // The recipe: SET NX of a mark per event, then ZINCRBY the new ones.
        let mut marks = redis::pipe();
        for (id, _, _, _) in batch {
            marks
                .cmd("SET")
                .arg(format!("seen:{id}"))
                .arg(1)
                .arg("NX")
                .arg("EX")
                .arg(3600);
        }
        let first: Vec<Option<String>> = marks.query(&mut c).expect("SET NX");
        let mut incrs = redis::pipe();
        for ((_, board, member, delta), first) in batch.iter().zip(&first) {
            if first.is_some() {
                incrs
                    .zincr(format!("rank:{board}"), member, *delta)
                    .ignore();
            }
        }
        let _: () = incrs.query(&mut c).expect("ZINCRBY");
        // LB: one call per event; a resent id changes nothing.
        let mut lpipe = redis::pipe();
        let mut expected = Vec::new();
        for (id, board, member, delta) in batch {
            lpipe
                .cmd("LB.INCR")
                .arg(format!("lb:{board}"))
                .arg(member)
                .arg(delta)
                .arg("ID")
                .arg(id);
            let fresh = seen.insert(id.clone());
            let score = totals
                .entry(board)
                .or_default()
                .entry(member.clone())
                .or_default();
            if fresh {
                *score += delta;
            }
            expected.push((*score, i64::from(fresh)));
        }
        let replies: Vec<(i64, i64, i64)> = lpipe.query(&mut c).expect("LB.INCR");
        let got: Vec<(i64, i64)> = replies.iter().map(|r| (r.0, r.2)).collect();
        assert_eq!(got, expected, "LB.INCR ... ID replies");
    }
    assert_eq!(seen.len(), 3000);
    for (board, model) in &totals {
        let l = lb_all(&mut c, &format!("lb:{board}"));
        assert_eq!(&scores(&l), model, "lb:{board}: every score");
        let z: HashMap<String, i64> = zboard(&mut c, &format!("rank:{board}"))
            .into_iter()
            .collect();
        assert_eq!(scores(&l), z, "lb:{board}: same as the recipe");
        // Top 100 by score, as the recipe's ZREVRANGE 0 99 gives it.
        let top: Vec<Entry> = lb!("LB.TOP", &format!("lb:{board}"), &100)
            .query(&mut c)
            .expect("TOP");
        let zs: Vec<i64> = zboard(&mut c, &format!("rank:{board}"))
            .into_iter()
            .take(100)
            .map(|e| e.1)
            .collect();
        let ls: Vec<i64> = top.iter().map(|e| e.2).collect();
        assert_eq!(ls, zs, "lb:{board}: top 100 scores");
        let ranks: Vec<i64> = top.iter().map(|e| e.0).collect();
        assert_eq!(ranks, (1..=100).collect::<Vec<i64>>());
    }
    // Replaying the whole log again counts nothing.
    let mut replay = redis::pipe();
    for (id, board, member, delta) in events.iter().take(500) {
        replay
            .cmd("LB.INCR")
            .arg(format!("lb:{board}"))
            .arg(member)
            .arg(delta)
            .arg("ID")
            .arg(id);
    }
    let again: Vec<(i64, i64, i64)> = replay.query(&mut c).expect("replay");
    assert!(again.iter().all(|r| r.2 == 0), "a replayed event counted");
    assert_eq!(scores(&lb_all(&mut c, "lb:likes")), totals["likes"]);

    // A weekly board with a week's TTL, an hourly one that runs out.
    let weekly = "lb:likes:week:2025-16";
    let (a, b, d, set): (Write, Write, Write, bool) = redis::pipe()
        .atomic()
        .cmd("LB.INCR")
        .arg(weekly)
        .arg("article:1")
        .arg(1)
        .cmd("LB.INCR")
        .arg(weekly)
        .arg("article:2")
        .arg(1)
        .cmd("LB.INCR")
        .arg(weekly)
        .arg("article:1")
        .arg(1)
        .expire(weekly, 7 * 86400)
        .query(&mut c)
        .expect("weekly");
    assert_eq!((a, b, d, set), ((1, 1, 1), (1, 2, 1), (2, 1, 1), true));
    let hourly = "lb:likes:hour:2025041510";
    let _: () = redis::pipe()
        .atomic()
        .cmd("LB.INCR")
        .arg(hourly)
        .arg("article:1")
        .arg(1)
        .ignore()
        .pexpire(hourly, 300)
        .ignore()
        .query(&mut c)
        .expect("hourly");
    assert!(vanishes(&mut c, hourly), "the hourly board is still there");
}

// ---------------------------------------------------------------------------
// Scenario 4: one vote per user; the tally with ID instead of a script.

const VOTE: &str = r"
if redis.call('GETBIT', KEYS[1], tonumber(ARGV[1])) == 1 then
  return 0
end
redis.call('SETBIT', KEYS[1], tonumber(ARGV[1]), 1)
redis.call('ZINCRBY', KEYS[2], 1, ARGV[2])
return 1
";

fn lb_tally(c: &mut Connection) -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = lb_all(c, "lb:topic_rank")
        .into_iter()
        .map(|e| (e.1, e.2))
        .collect();
    v.sort();
    v
}

#[test]
fn scenario4_lb_vote_tally_by_event_id_survives_a_restart() {
    let dir = temp_dir("lbscenario4");
    let mut server = TestServer::start_with_aof(&dir);
    let mut c = server.conn();
    let mut rng = StdRng::seed_from_u64(7);
    let topics = ["topic_1", "topic_2", "topic_3", "topic_4", "topic_5"];
    let vote = redis::Script::new(VOTE);
    let mut ballots: Vec<(u32, &str)> = Vec::new();
    for _ in 0..1500 {
        let user = rng.random_range(1..999_999u32);
        let n = rng.random_range(1..=3);
        for t in topics.choose_multiple(&mut rng, n) {
            ballots.push((user, t));
        }
    }
    let resent: Vec<_> = ballots.choose_multiple(&mut rng, 600).cloned().collect();
    ballots.extend(resent);
    ballots.shuffle(&mut rng);

    let mut counted: HashSet<(u32, &str)> = HashSet::new();
    for batch in ballots.chunks(300) {
        let mut zpipe = redis::pipe();
        zpipe.load_script(&vote).ignore();
        let mut lpipe = redis::pipe();
        let mut expected = Vec::new();
        for (user, topic) in batch {
            zpipe.invoke_script(
                vote.key(format!("vote:topic:{topic}"))
                    .key("topic_rank")
                    .arg(user)
                    .arg(topic),
            );
            lpipe
                .cmd("LB.INCR")
                .arg("lb:topic_rank")
                .arg(topic)
                .arg(1)
                .arg("ID")
                .arg(format!("vote:{user}:{topic}"));
            expected.push(i64::from(counted.insert((*user, topic))));
        }
        let script: Vec<i64> = zpipe.query(&mut c).expect("votes");
        let replies: Vec<(i64, i64, i64)> = lpipe.query(&mut c).expect("LB votes");
        let lch: Vec<i64> = replies.iter().map(|r| r.2).collect();
        assert_eq!(script, expected, "the script's 1 = counted");
        assert_eq!(lch, expected, "LB.INCR ID: changed 1 = counted");
    }
    let mut recipe: Vec<(String, i64)> = zboard(&mut c, "topic_rank");
    recipe.sort();
    assert_eq!(lb_tally(&mut c), recipe, "same tally as the script");
    let live: Vec<Entry> = lb!("LB.TOP", &"lb:topic_rank", &10)
        .query(&mut c)
        .expect("TOP");
    let live_scores: Vec<i64> = live.iter().map(|e| e.2).collect();
    let z_scores: Vec<i64> = zboard(&mut c, "topic_rank")
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(live_scores, z_scores, "live ranking");

    // Restart from the AOF: the tally and the ids window come back, so a
    // retried ballot still counts once and a new one counts.
    let before = lb_tally(&mut c);
    drop(c);
    server.terminate();
    let server = TestServer::start_with_aof(&dir);
    let mut c = server.conn();
    assert_eq!(lb_tally(&mut c), before, "tally after the restart");
    for (user, topic) in &ballots[..50] {
        let (_, _, changed): (i64, i64, i64) = lb!(
            "LB.INCR",
            &"lb:topic_rank",
            topic,
            &1,
            &"ID",
            &format!("vote:{user}:{topic}")
        )
        .query(&mut c)
        .expect("retry");
        assert_eq!(changed, 0, "a retried ballot of {user} counted");
    }
    let newcomer = (1_000_000u32..)
        .find(|u| !counted.contains(&(*u, "topic_1")))
        .expect("a newcomer");
    let (score, _, changed): (i64, i64, i64) = lb!(
        "LB.INCR",
        &"lb:topic_rank",
        &"topic_1",
        &1,
        &"ID",
        &format!("vote:{newcomer}:topic_1")
    )
    .query(&mut c)
    .expect("new vote");
    let was = before.iter().find(|e| e.0 == "topic_1").map_or(0, |e| e.1);
    assert_eq!((score, changed), (was + 1, 1));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// Scenario 5: prize campaign; equal points ranked by time, no 2^53 ceiling.

const END: i64 = 1_760_000_000;
const A: i64 = END + 2_000_000;
const START: i64 = END - 92 * 86400;

#[test]
fn scenario5_lb_prize_campaign_exact_ranks_with_times() {
    let server = TestServer::start(&[]);
    let mut c = server.conn();
    let mut rng = StdRng::seed_from_u64(5);
    let (zkey, lkey) = ("campaign:spring", "lb:campaign:spring");
    let ok: String = lb!(
        "LB.CREATE",
        &lkey,
        &"POLICY",
        &"SET",
        &"TIEBREAK",
        &"EARLIEST"
    )
    .query(&mut c)
    .expect("CREATE");
    assert_eq!(ok, "OK");
    let common: Vec<i64> = (0..20).map(|_| rng.random_range(0..900_000_000)).collect();
    let mut model = Model::default();
    let mut zpipe = redis::pipe();
    let mut lpipe = redis::pipe();
    let mut times = HashSet::new();
    for uid in 1..=500 {
        let member = format!("user:{uid}");
        let points = if rng.random::<f64>() < 0.4 {
            *common.choose(&mut rng).expect("points")
        } else {
            rng.random_range(0..900_000_000)
        };
        let t = loop {
            let t = rng.random_range(START..=END);
            if times.insert(t) {
                break t;
            }
        };
        zpipe
            .zadd(zkey, &member, points * 10_000_000 + (A - t))
            .ignore();
        lpipe
            .cmd("LB.SUBMIT")
            .arg(lkey)
            .arg(&member)
            .arg(points)
            .arg("AT")
            .arg(t * 1000)
            .ignore();
        model.entries.insert(member, (points, t as u64 * 1000));
    }
    let _: () = zpipe.query(&mut c).expect("ZADD");
    let _: () = lpipe.query(&mut c).expect("SUBMIT");
    let order = lb_all(&mut c, lkey);
    assert_eq!(order, model.ranked(), "the model's order");
    let recipe = zboard(&mut c, zkey);
    let rm: Vec<&str> = recipe.iter().map(|e| e.0.as_str()).collect();
    let lm: Vec<&str> = order.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(lm, rm, "the packed recipe's order");
    let rp: Vec<i64> = recipe.iter().map(|e| e.1 / 10_000_000).collect();
    let lp: Vec<i64> = order.iter().map(|e| e.2).collect();
    assert_eq!(lp, rp, "points");

    // No 2^53 or 10^8 ceiling: the whole signed 64-bit range is exact, and
    // an overflow is an error that changes nothing.
    let max = i64::MAX;
    let (s, r, _): (i64, i64, i64) = lb!("LB.SUBMIT", &lkey, &"edge:max", &max)
        .query(&mut c)
        .expect("max");
    assert_eq!((s, r), (max, 1));
    let e = lb!("LB.INCR", &lkey, &"edge:max", &1)
        .query::<redis::Value>(&mut c)
        .expect_err("overflow");
    assert!(e.to_string().contains("overflow"), "{e}");
    let s: Option<i64> = lb!("LB.SCORE", &lkey, &"edge:max")
        .query(&mut c)
        .expect("SCORE");
    assert_eq!(s, Some(max));
    let _: i64 = lb!("LB.REM", &lkey, &"edge:max")
        .query(&mut c)
        .expect("REM");

    // Four connections fight over the top 40 places at once: the recipe
    // gets ZINCRBY of packed deltas, the board LB.INCR of points.
    let players: Vec<String> = order.iter().take(40).map(|e| e.1.clone()).collect();
    let plans: Vec<Vec<(String, i64, i64)>> = (0..4)
        .map(|_| {
            (0..150)
                .map(|_| {
                    let m = players.choose(&mut rng).expect("players").clone();
                    (m, rng.random_range(1..1000), rng.random_range(0..86400))
                })
                .collect()
        })
        .collect();
    let handles: Vec<_> = plans
        .iter()
        .cloned()
        .map(|plan| {
            let mut w = server.conn();
            thread::spawn(move || {
                for (m, points, later) in plan {
                    let _: f64 = w
                        .zincr(zkey, &m, points * 10_000_000 - later)
                        .expect("ZINCRBY");
                    let (_, rank, changed): (i64, i64, i64) = lb!("LB.INCR", &lkey, &m, &points)
                        .query(&mut w)
                        .expect("LB.INCR");
                    assert!(rank >= 1 && changed == 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer");
    }
    let mut points: HashMap<String, i64> = model
        .entries
        .iter()
        .map(|(m, (p, _))| (m.clone(), *p))
        .collect();
    for (m, p, _) in plans.iter().flatten() {
        *points.get_mut(m).expect("player") += p;
    }
    let order = lb_all(&mut c, lkey);
    assert_eq!(scores(&order), points, "every increment counted once");
    let recipe = zboard(&mut c, zkey);
    let rp: HashMap<String, i64> = recipe
        .iter()
        .map(|(m, s)| (m.clone(), s / 10_000_000))
        .collect();
    assert_eq!(scores(&order), rp, "the recipe's points");
    // Exact places: each rank is the place, equal points by time reached.
    let timed: Vec<(i64, String, i64, u64)> = lb!("LB.RANGE", &lkey, &1, &60, &"WITHTIME")
        .query(&mut c)
        .expect("RANGE");
    for w in timed.windows(2) {
        assert!(
            w[0].2 > w[1].2 || (w[0].2 == w[1].2 && w[0].3 <= w[1].3),
            "order at {} and {}",
            w[0].0,
            w[1].0
        );
    }
    for (place, member, _, _) in timed.iter().take(30) {
        let r: Option<i64> = lb!("LB.RANK", &lkey, member).query(&mut c).expect("RANK");
        assert_eq!(r, Some(*place), "LB.RANK of {member}");
    }
    let ranks: Vec<Option<i64>> = lb!("LB.MRANK", &lkey, &timed[9].1, &timed[10].1)
        .query(&mut c)
        .expect("MRANK");
    assert_eq!(ranks, vec![Some(10), Some(11)], "places 10 and 11");
}
