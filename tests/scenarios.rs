//! The five leaderboard scenarios (shared/scenarios.md) written as a Rust
//! user writes them: the `redis` crate's async API on one multiplexed tokio
//! connection (more where the scenario is about concurrent writers),
//! pipelines, `redis::Script` for the vote. Every check is against a model
//! the test computes; scenario 4 restarts the server with the AOF on.
mod common;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis::{
    AsyncCommands, ExistenceCheck, SetExpiry, SetOptions, SortedSetAddOptions, UpdateCheck,
};

use common::{temp_dir, TestServer};

async fn connect(server: &TestServer) -> MultiplexedConnection {
    redis::Client::open(server.url())
        .expect("client")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// A board's (member, score) pairs in ZREVRANGE order: score high to low,
/// equal scores by member bytes, also high to low.
fn by_rank(scores: &HashMap<String, f64>) -> Vec<(String, f64)> {
    let mut pairs: Vec<(String, f64)> = scores.iter().map(|(m, s)| (m.clone(), *s)).collect();
    pairs.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    pairs
}

fn members(pairs: &[(String, f64)]) -> Vec<String> {
    pairs.iter().map(|(m, _)| m.clone()).collect()
}

/// Polls until `key` is gone (at most 5 s); tells whether it went.
async fn vanishes(con: &mut MultiplexedConnection, key: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let exists: bool = con.exists(key).await.expect("EXISTS");
        if !exists {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

// ---------------------------------------------------------------------------
// Scenario 1: daily step counts with a friends board (fitness app).

const DAYS: [&str; 3] = ["20250413", "20250414", "20250415"];
const STEP_USERS: u32 = 3000;
const THREE_DAYS: i64 = 3 * 86400;

/// Every upload of one day, (member, running total), in arrival order.
fn uploads_for_day(rng: &mut StdRng) -> Vec<(String, i64)> {
    let mut uploads = Vec::new();
    for uid in 1..=STEP_USERS {
        if rng.random::<f64>() < 0.1 {
            continue; // did not open the app that day
        }
        let n = rng.random_range(1..=3);
        let mut totals: Vec<i64> = (0..n).map(|_| rng.random_range(0..40_000)).collect();
        totals.sort_unstable();
        uploads.extend(totals.into_iter().map(|t| (format!("user:{uid}"), t)));
    }
    uploads.shuffle(rng); // the queue does not keep order
    uploads
}

/// ZADD argument lists of up to 500 (score, member) pairs; a member
/// uploaded twice in one batch keeps its larger total (as GT would).
fn batches(uploads: &[(String, i64)]) -> Vec<Vec<(i64, String)>> {
    let mut out = Vec::new();
    let mut batch: HashMap<String, i64> = HashMap::new();
    for (member, steps) in uploads {
        if !batch.contains_key(member) && batch.len() == 500 {
            out.push(batch.drain().map(|(m, s)| (s, m)).collect());
        }
        let kept = batch.entry(member.clone()).or_insert(*steps);
        *kept = (*kept).max(*steps);
    }
    out.push(batch.drain().map(|(m, s)| (s, m)).collect());
    out
}

/// Applies one ZADD GT CH to the model; returns the count CH reports.
fn apply_gt(board: &mut HashMap<String, f64>, batch: &[(i64, String)]) -> i64 {
    let mut changed = 0;
    for (steps, member) in batch {
        let steps = *steps as f64;
        if board.get(member).is_none_or(|old| steps > *old) {
            board.insert(member.clone(), steps);
            changed += 1;
        }
    }
    changed
}

#[tokio::test]
async fn scenario1_daily_steps_with_a_friends_board() {
    let server = TestServer::start(&[]);
    let mut con = connect(&server).await;
    let mut rng = StdRng::seed_from_u64(20250415);
    let gt_ch = SortedSetAddOptions::add_or_update(Some(UpdateCheck::GT)).include_changed_count();
    let mut boards: HashMap<&str, HashMap<String, f64>> = HashMap::new();
    for day in DAYS {
        let key = format!("step_rank:{day}");
        let board = boards.entry(day).or_default();
        let all = batches(&uploads_for_day(&mut rng));
        // Each burst of four batches lands whole, in MULTI ... EXEC.
        for burst in all.chunks(4) {
            let mut pipe = redis::pipe();
            pipe.atomic();
            for batch in burst {
                pipe.zadd_multiple_options(&key, batch, &gt_ch);
            }
            pipe.expire(&key, THREE_DAYS);
            let replies: Vec<i64> = pipe.query_async(&mut con).await.expect("burst");
            let mut expected: Vec<i64> = burst.iter().map(|b| apply_gt(board, b)).collect();
            expected.push(1);
            assert_eq!(replies, expected, "{key}: ZADD GT CH counts of a burst");
        }
        let card: usize = con.zcard(&key).await.expect("ZCARD");
        assert_eq!(card, board.len(), "{key}: ZCARD");
        let top10: Vec<(String, f64)> = con.zrevrange_withscores(&key, 0, 9).await.expect("top");
        assert_eq!(top10, by_rank(board)[..10].to_vec(), "{key}: top 10");
    }

    // A friend list of 300 ids, some of whom never uploaded today.
    let day_key = format!("step_rank:{}", DAYS[2]);
    let friends_key = "friends:1001";
    let ids: Vec<u32> = (1..STEP_USERS + 600).collect();
    let friends: Vec<String> = ids
        .choose_multiple(&mut rng, 300)
        .map(|id| format!("user:{id}"))
        .collect();
    let added: usize = con.sadd(friends_key, &friends).await.expect("SADD");
    assert_eq!(added, 300);
    let again: usize = con.sadd(friends_key, &friends[..10]).await.expect("SADD");
    assert_eq!(again, 0, "SADD of friends already there");
    let stored: HashSet<String> = con.smembers(friends_key).await.expect("SMEMBERS");
    assert_eq!(stored, friends.iter().cloned().collect::<HashSet<_>>());
    let is_friend: bool = con
        .sismember(friends_key, &friends[0])
        .await
        .expect("SISMEMBER");
    let is_stranger: bool = con
        .sismember(friends_key, "user:1001")
        .await
        .expect("SISMEMBER");
    assert!(is_friend && !is_stranger, "SISMEMBER");

    let today = &boards[DAYS[2]];
    let friend_board: HashMap<String, f64> = today
        .iter()
        .filter(|(m, _)| stored.contains(*m))
        .map(|(m, s)| (m.clone(), *s))
        .collect();
    let expected = by_rank(&friend_board);
    // One round trip; ZINTER answers in ascending order, the app reverses.
    let inter: Vec<(String, f64)> = redis::cmd("ZINTER")
        .arg(2)
        .arg(&day_key)
        .arg(friends_key)
        .arg("WEIGHTS")
        .arg(1)
        .arg(0)
        .arg("WITHSCORES")
        .query_async(&mut con)
        .await
        .expect("ZINTER");
    let mut ascending = expected.clone();
    ascending.reverse();
    assert_eq!(inter, ascending, "ZINTER ... WEIGHTS 1 0 WITHSCORES");
    // The way most apps do it today: members, then one ZMSCORE.
    let listed: Vec<String> = con.smembers(friends_key).await.expect("SMEMBERS");
    let scores: Vec<Option<f64>> = redis::cmd("ZMSCORE")
        .arg(&day_key)
        .arg(&listed)
        .query_async(&mut con)
        .await
        .expect("ZMSCORE");
    let by_hand: HashMap<String, f64> = listed
        .into_iter()
        .zip(scores)
        .filter_map(|(m, s)| s.map(|s| (m, s)))
        .collect();
    assert_eq!(by_rank(&by_hand), expected, "friends board by ZMSCORE");

    // Hot and cold: the oldest day leaves memory.
    let oldest = format!("step_rank:{}", DAYS[0]);
    let set: bool = con.expire(&oldest, 1).await.expect("EXPIRE");
    assert!(set);
    let ttl: i64 = con.ttl(&oldest).await.expect("TTL");
    assert_eq!(ttl, 1);
    let kept_ttl: i64 = con.ttl(&day_key).await.expect("TTL");
    assert!(
        (THREE_DAYS - 5..=THREE_DAYS).contains(&kept_ttl),
        "TTL {kept_ttl}"
    );
    assert!(
        vanishes(&mut con, &oldest).await,
        "the expired day is still there"
    );
    let gone: Vec<(String, f64)> = con.zrevrange_withscores(&oldest, 0, 9).await.expect("top");
    assert_eq!(gone, vec![]);
    let card: usize = con.zcard(&day_key).await.expect("ZCARD");
    assert_eq!(card, today.len(), "today is still hot");
}

// ---------------------------------------------------------------------------
// Scenario 2: game server power ranking, ties broken by time.

const BASE: f64 = 317242022400.0; // a far-future unix second (year 12023)

fn tie_score(power: i64, t: i64) -> f64 {
    power as f64 + (BASE - t as f64) / BASE
}

/// C's %.17g for the plain-notation numbers of these boards (1e6 to 1e7,
/// with a fraction): 17 significant digits, trailing zeros dropped.
fn g17(x: f64) -> String {
    let int_digits = (x.abs().log10().floor() as usize) + 1;
    let s = format!("{:.*}", 17 - int_digits, x);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

async fn check_power_board(
    con: &mut MultiplexedConnection,
    key: &str,
    scores: &HashMap<String, f64>,
) {
    let model = by_rank(scores);
    let whole: Vec<(String, f64)> = con.zrevrange_withscores(key, 0, -1).await.expect("board");
    assert_eq!(
        whole, model,
        "{key}: the whole board, every score the float sent"
    );
    let texts: Vec<(String, String)> = con.zrevrange_withscores(key, 0, -1).await.expect("board");
    for ((member, text), (_, score)) in texts.iter().zip(&model) {
        assert_eq!(text, &g17(*score), "{key}: score text of {member}");
    }
}

async fn power_board(con: &mut MultiplexedConnection, rng: &mut StdRng, key: &str, players: usize) {
    let powers: Vec<i64> = (0..players / 4)
        .map(|_| rng.random_range(1_000_000..2_000_000))
        .collect();
    let mut board: HashMap<String, (i64, i64)> = HashMap::new();
    for pid in 1..=players {
        let power = if rng.random::<f64>() < 0.5 {
            *powers.choose(rng).expect("powers")
        } else {
            rng.random_range(1_000_000..2_000_000)
        };
        let t = rng.random_range(1_700_000_000..1_760_000_000);
        board.insert(format!("player:{pid}"), (power, t));
    }
    let mut scores: HashMap<String, f64> = board
        .iter()
        .map(|(m, (p, t))| (m.clone(), tie_score(*p, *t)))
        .collect();
    let items: Vec<(f64, &str)> = scores.iter().map(|(m, s)| (*s, m.as_str())).collect();
    let added: usize = con.zadd_multiple(key, &items).await.expect("ZADD");
    assert_eq!(added, players);
    check_power_board(con, key, &scores).await;

    // Top 3 as the game asks for it.
    let top3: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(2)
        .arg("REV")
        .arg("WITHSCORES")
        .query_async(con)
        .await
        .expect("ZRANGE REV");
    assert_eq!(top3, by_rank(&scores)[..3].to_vec(), "{key}: top 3");

    // Equal power: who got there first ranks higher.
    let mut by_power: HashMap<i64, Vec<(i64, String)>> = HashMap::new();
    for (member, (power, t)) in &board {
        by_power
            .entry(*power)
            .or_default()
            .push((*t, member.clone()));
    }
    let mut tie_groups = 0;
    for group in by_power.values_mut().filter(|g| g.len() > 1) {
        group.sort();
        let mut ranks = Vec::new();
        for (_, member) in group.iter() {
            let rank: Option<usize> = con.zrevrank(key, member).await.expect("ZREVRANK");
            ranks.push(rank.expect("ranked"));
        }
        assert!(
            ranks.windows(2).all(|w| w[0] < w[1]),
            "{key}: earlier ranks higher: {group:?} {ranks:?}"
        );
        tie_groups += 1;
    }
    assert!(tie_groups > 0, "{key}: the board has equal powers");

    // A player's place and score.
    let order = members(&by_rank(&scores));
    for member in order.choose_multiple(rng, 20) {
        let rank: Option<usize> = con.zrevrank(key, member).await.expect("ZREVRANK");
        assert_eq!(
            rank,
            order.iter().position(|m| m == member),
            "{key}: ZREVRANK {member}"
        );
        let score: Option<f64> = con.zscore(key, member).await.expect("ZSCORE");
        assert_eq!(score, Some(scores[member]), "{key}: ZSCORE {member}");
    }
    // Power gained in a fight: ZINCRBY keeps the time part.
    for member in order.choose_multiple(rng, 10) {
        let delta: i64 = rng.random_range(1..50_000);
        let expected = scores[member] + delta as f64;
        let got: f64 = con.zincr(key, member, delta).await.expect("ZINCRBY");
        assert_eq!(got, expected, "{key}: ZINCRBY {member}");
        scores.insert(member.clone(), expected);
    }
    // A new record re-stamps the time part: ZADD XX CH.
    let member = order.last().expect("players");
    let (power, _) = board[member];
    let record = tie_score(power + 1_000_000, 1_760_000_100);
    scores.insert(member.clone(), record);
    let xx_ch = SortedSetAddOptions::update_only(None).include_changed_count();
    let changed: usize = con
        .zadd_options(key, member, record, &xx_ch)
        .await
        .expect("ZADD XX CH");
    assert_eq!(changed, 1);
    let rank: Option<usize> = con.zrevrank(key, member).await.expect("ZREVRANK");
    assert_eq!(
        rank,
        members(&by_rank(&scores)).iter().position(|m| m == member)
    );
    check_power_board(con, key, &scores).await;
}

#[tokio::test]
async fn scenario2_power_ranking_with_ties_broken_by_time() {
    let server = TestServer::start(&[]);
    let mut con = connect(&server).await;
    let mut rng = StdRng::seed_from_u64(339);
    power_board(&mut con, &mut rng, "leaderboard:339", 300).await; // skiplist
    power_board(&mut con, &mut rng, "leaderboard:340", 60).await; // compact
    let none: Option<usize> = con
        .zrevrank("leaderboard:339", "player:none")
        .await
        .expect("rank");
    assert_eq!(none, None);
}

// ---------------------------------------------------------------------------
// Scenario 3: likes, comments and points; idempotent consumers; TTL boards.

#[tokio::test]
async fn scenario3_content_boards_with_idempotent_consumers() {
    let server = TestServer::start(&[]);
    let mut con = connect(&server).await;
    let mut rng = StdRng::seed_from_u64(42);
    let mut events: Vec<(String, &str, String, i64)> = Vec::new();
    for seq in 0..4000 {
        let article = format!("article:{}", rng.random_range(1..=300));
        let (board, delta) = match rng.random_range(0..4) {
            0 | 1 => ("rank:likes", if rng.random::<f64>() < 0.8 { 1 } else { -1 }),
            2 => ("rank:comments", 1),
            _ => ("rank:points", rng.random_range(1..=10)),
        };
        let id = format!("{article}:{board}:{}", 1_744_700_000 + seq);
        events.push((id, board, article, delta));
    }
    let resent: Vec<_> = events.choose_multiple(&mut rng, 800).cloned().collect();
    for event in resent {
        let at = rng.random_range(0..=events.len());
        events.insert(at, event);
    }

    let mark = SetOptions::default()
        .conditional_set(ExistenceCheck::NX)
        .with_expiration(SetExpiry::EX(3600));
    let mut boards: HashMap<&str, HashMap<String, f64>> = HashMap::new();
    let mut seen = HashSet::new();
    for batch in events.chunks(200) {
        let mut marks = redis::pipe();
        for (id, _, _, _) in batch {
            marks.set_options(format!("seen:{id}"), 1, mark.clone());
        }
        let first: Vec<Option<String>> = marks.query_async(&mut con).await.expect("SET NX");
        let mut incrs = redis::pipe();
        incrs.atomic();
        let mut expected = Vec::new();
        for ((id, board, member, delta), first) in batch.iter().zip(&first) {
            assert_eq!(first.is_some(), seen.insert(id.clone()), "SET NX of {id}");
            if first.is_some() {
                incrs.zincr(*board, member, *delta);
                let score = boards
                    .entry(board)
                    .or_default()
                    .entry(member.clone())
                    .or_default();
                *score += *delta as f64;
                expected.push(*score);
            }
        }
        let replies: Vec<f64> = incrs.query_async(&mut con).await.expect("ZINCRBY");
        assert_eq!(replies, expected, "ZINCRBY replies");
        let top: Vec<(String, f64)> = con
            .zrevrange_withscores("rank:likes", 0, 9)
            .await
            .expect("top");
        assert_eq!(
            top,
            by_rank(&boards["rank:likes"])[..10].to_vec(),
            "top 10 likes"
        );
    }
    assert_eq!(seen.len(), 4000);
    for (board, scores) in &boards {
        let top100: Vec<(String, f64)> =
            con.zrevrange_withscores(*board, 0, 99).await.expect("top");
        assert_eq!(top100, by_rank(scores)[..100].to_vec(), "{board}: top 100");
    }
    let ttl: i64 = con.ttl(format!("seen:{}", events[0].0)).await.expect("TTL");
    assert!((3595..=3600).contains(&ttl), "dedupe mark TTL {ttl}");

    // A weekly board with a week's TTL, and an hourly one that runs out.
    let weekly = "rank:likes:week:2025-16";
    let (a, b, c, set): (f64, f64, f64, bool) = redis::pipe()
        .atomic()
        .zincr(weekly, "article:1", 1)
        .zincr(weekly, "article:2", 1)
        .zincr(weekly, "article:1", 1)
        .expire(weekly, 7 * 86400)
        .query_async(&mut con)
        .await
        .expect("weekly");
    assert_eq!((a, b, c, set), (1.0, 1.0, 2.0, true));
    let hourly = "rank:likes:hour:2025041510";
    let _: () = redis::pipe()
        .atomic()
        .zincr(hourly, "article:1", 1)
        .ignore()
        .pexpire(hourly, 300)
        .ignore()
        .query_async(&mut con)
        .await
        .expect("hourly");
    let pttl: i64 = con.pttl(hourly).await.expect("PTTL");
    assert!((1..=300).contains(&pttl), "PTTL {pttl}");
    assert!(
        vanishes(&mut con, hourly).await,
        "the hourly board is still there"
    );
}

// ---------------------------------------------------------------------------
// Scenario 4: one vote per user, live tally, across a restart.

const VOTE: &str = r"
if redis.call('GETBIT', KEYS[1], tonumber(ARGV[1])) == 1 then
  return 0
end
redis.call('SETBIT', KEYS[1], tonumber(ARGV[1]), 1)
redis.call('ZINCRBY', KEYS[2], 1, ARGV[2])
return 1
";

const TOPICS: [&str; 5] = ["topic_1", "topic_2", "topic_3", "topic_4", "topic_5"];

/// Everything the poll keeps: the tally and each topic's bitmap.
async fn poll_state(con: &mut MultiplexedConnection) -> (Vec<(String, f64)>, Vec<Vec<u8>>) {
    let tally: Vec<(String, f64)> = con
        .zrevrange_withscores("topic_rank", 0, -1)
        .await
        .expect("tally");
    let mut bitmaps = Vec::new();
    for topic in TOPICS {
        let bits: Vec<u8> = con.get(format!("vote:topic:{topic}")).await.expect("GET");
        bitmaps.push(bits);
    }
    (tally, bitmaps)
}

struct DataDir(PathBuf);

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn scenario4_one_vote_per_user_survives_a_restart() {
    let dir = DataDir(temp_dir("scenario4"));
    let mut server = TestServer::start_with_aof(&dir.0);
    let mut con = connect(&server).await;
    let mut rng = StdRng::seed_from_u64(7);
    let vote = redis::Script::new(VOTE);

    let mut users: Vec<u32> = (0..2998).map(|_| rng.random_range(1..999_999)).collect();
    users.extend([0, 999_999]);
    let mut sent: Vec<(u32, &str)> = Vec::new();
    for user in &users {
        let n = rng.random_range(1..=3);
        for topic in TOPICS.choose_multiple(&mut rng, n) {
            sent.push((*user, topic));
        }
    }
    let resent: Vec<_> = sent
        .choose_multiple(&mut rng, sent.len() * 3 / 10)
        .cloned()
        .collect();
    for ballot in resent {
        let at = rng.random_range(0..=sent.len());
        sent.insert(at, ballot);
    }

    let mut voters: HashMap<&str, HashSet<u32>> = HashMap::new();
    for batch in sent.chunks(500) {
        let mut pipe = redis::pipe();
        pipe.load_script(&vote).ignore();
        let mut expected = Vec::new();
        for (user, topic) in batch {
            pipe.invoke_script(
                vote.key(format!("vote:topic:{topic}"))
                    .key("topic_rank")
                    .arg(user)
                    .arg(topic),
            );
            expected.push(i64::from(voters.entry(topic).or_default().insert(*user)));
        }
        let counted: Vec<i64> = pipe.query_async(&mut con).await.expect("votes");
        assert_eq!(counted, expected, "vote script replies (1 = counted)");
    }
    let tally: HashMap<String, f64> = voters
        .iter()
        .map(|(t, users)| (t.to_string(), users.len() as f64))
        .collect();
    let live: Vec<(String, f64)> = con
        .zrevrange_withscores("topic_rank", 0, 9)
        .await
        .expect("tally");
    assert_eq!(live, by_rank(&tally), "live ranking");
    for (topic, users) in &voters {
        let key = format!("vote:topic:{topic}");
        let count: usize = con.bitcount(&key).await.expect("BITCOUNT");
        assert_eq!(count, users.len(), "{key}: BITCOUNT");
        let len: usize = con.strlen(&key).await.expect("STRLEN");
        let highest = users.iter().max().copied().unwrap_or(0) as usize;
        assert_eq!(len, highest / 8 + 1, "{key}: sized to the highest bit");
        for _ in 0..50 {
            let user = rng.random_range(0..1_000_000u32);
            let bit: bool = con.getbit(&key, user as usize).await.expect("GETBIT");
            assert_eq!(bit, users.contains(&user), "{key}: GETBIT {user}");
        }
    }

    // The per-user lock.
    let lock = SetOptions::default()
        .conditional_set(ExistenceCheck::NX)
        .with_expiration(SetExpiry::EX(5));
    let first: Option<String> = con
        .set_options("lock:user:1001", 1, lock.clone())
        .await
        .expect("SET");
    let second: Option<String> = con
        .set_options("lock:user:1001", 1, lock.clone())
        .await
        .expect("SET");
    assert_eq!((first.as_deref(), second), (Some("OK"), None));
    let ttl: i64 = con.ttl("lock:user:1001").await.expect("TTL");
    assert!((1..=5).contains(&ttl));
    let released: usize = con.del("lock:user:1001").await.expect("DEL");
    assert_eq!(released, 1);

    // Restart with the AOF on: tally and bitmaps come back identical.
    let before = poll_state(&mut con).await;
    drop(con);
    server.terminate();
    let server = TestServer::start_with_aof(&dir.0);
    let mut con = connect(&server).await;
    assert_eq!(
        poll_state(&mut con).await,
        before,
        "poll state after the restart"
    );

    // The script cache is empty now: invoke_async loads it again, and votes
    // already cast still count once.
    for (user, topic) in &sent[..50] {
        let counted: i64 = vote
            .key(format!("vote:topic:{topic}"))
            .key("topic_rank")
            .arg(user)
            .arg(topic)
            .invoke_async(&mut con)
            .await
            .expect("vote");
        assert_eq!(counted, 0, "vote of {user} for {topic} after the restart");
    }
    let newcomer = (0..)
        .find(|u| !voters["topic_1"].contains(u))
        .expect("a newcomer");
    let counted: i64 = vote
        .key("vote:topic:topic_1")
        .key("topic_rank")
        .arg(newcomer)
        .arg("topic_1")
        .invoke_async(&mut con)
        .await
        .expect("vote");
    assert_eq!(counted, 1);
    let score: Option<f64> = con.zscore("topic_rank", "topic_1").await.expect("ZSCORE");
    assert_eq!(score, Some(voters["topic_1"].len() as f64 + 1.0));
}

// ---------------------------------------------------------------------------
// Scenario 5: prize campaign, scores `points * 10^7 + (A - t)` up to 2^53.

const CAMPAIGN: &str = "campaign:spring";
const END: i64 = 1_760_000_000;
const A: i64 = END + 2_000_000;
const START: i64 = END - 92 * 86400;

fn packed(points: i64, t: i64) -> i64 {
    points * 10_000_000 + (A - t)
}

/// The board as text and as parsed floats both equal the model exactly;
/// returns the members in rank order.
async fn check_campaign(
    con: &mut MultiplexedConnection,
    scores: &HashMap<String, i64>,
) -> Vec<String> {
    let mut model: Vec<(String, i64)> = scores.iter().map(|(m, s)| (m.clone(), *s)).collect();
    model.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let texts: Vec<(String, String)> = con
        .zrevrange_withscores(CAMPAIGN, 0, -1)
        .await
        .expect("board");
    let expected: Vec<(String, String)> = model
        .iter()
        .map(|(m, s)| (m.clone(), s.to_string()))
        .collect();
    assert_eq!(texts, expected, "campaign board as text");
    let parsed: Vec<(String, f64)> = con
        .zrevrange_withscores(CAMPAIGN, 0, -1)
        .await
        .expect("board");
    let exact: Vec<(String, f64)> = model.iter().map(|(m, s)| (m.clone(), *s as f64)).collect();
    assert_eq!(parsed, exact, "campaign board as floats");
    model.into_iter().map(|(m, _)| m).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario5_packed_scores_up_to_2_pow_53_rank_exactly() {
    let server = TestServer::start(&[]);
    let mut con = connect(&server).await;
    let mut rng = StdRng::seed_from_u64(5);
    let common_points: Vec<i64> = (0..20).map(|_| rng.random_range(0..900_000_000)).collect();
    let mut scores: HashMap<String, i64> = HashMap::new();
    for uid in 1..=500 {
        let points = if rng.random::<f64>() < 0.4 {
            *common_points.choose(&mut rng).expect("points")
        } else {
            rng.random_range(0..900_000_000)
        };
        scores.insert(
            format!("user:{uid}"),
            packed(points, rng.random_range(START..=END)),
        );
    }
    scores.insert("edge:2^53".into(), 1 << 53);
    scores.insert("edge:2^53-1".into(), (1 << 53) - 1);
    scores.insert("example".into(), 1_000_000_001_999_999);
    let items: Vec<(i64, String)> = scores.iter().map(|(m, s)| (*s, m.clone())).collect();
    let mut pipe = redis::pipe();
    for chunk in items.chunks(100) {
        pipe.zadd_multiple(CAMPAIGN, chunk);
    }
    let added: Vec<usize> = pipe.query_async(&mut con).await.expect("ZADD");
    assert_eq!(added.iter().sum::<usize>(), scores.len());
    let text: Option<String> = con.zscore(CAMPAIGN, "example").await.expect("ZSCORE");
    assert_eq!(text.as_deref(), Some("1000000001999999"));
    let order = check_campaign(&mut con, &scores).await;
    assert_eq!(order[0], "edge:2^53");

    // Equal points: the later scorer ranks lower.
    let early = packed(123_456_789, START + 10);
    let late = packed(123_456_789, START + 20);
    let _: usize = con
        .zadd_multiple(CAMPAIGN, &[(early, "tie:early"), (late, "tie:late")])
        .await
        .expect("ZADD");
    scores.insert("tie:early".into(), early);
    scores.insert("tie:late".into(), late);
    let e: Option<usize> = con.zrevrank(CAMPAIGN, "tie:early").await.expect("rank");
    let l: Option<usize> = con.zrevrank(CAMPAIGN, "tie:late").await.expect("rank");
    assert_eq!(l, e.map(|e| e + 1), "equal points: later ranks lower");

    // Four connections fight over the top 40 places at once.
    let players: Vec<String> = order
        .iter()
        .filter(|m| m.starts_with("user:") && scores[*m] < 6_000_000_000_000_000)
        .take(40)
        .cloned()
        .collect();
    let plans: Vec<Vec<(String, i64)>> = (0..4)
        .map(|_| {
            (0..150)
                .map(|_| {
                    let member = players.choose(&mut rng).expect("players").clone();
                    let delta = rng.random_range(1..1000) * 10_000_000 - rng.random_range(0..86400);
                    (member, delta)
                })
                .collect()
        })
        .collect();
    let mut tasks = Vec::new();
    for plan in plans.clone() {
        let mut writer = connect(&server).await;
        tasks.push(tokio::spawn(async move {
            for (member, delta) in plan {
                let text: String = writer
                    .zincr(CAMPAIGN, &member, delta)
                    .await
                    .expect("ZINCRBY");
                assert!(
                    text.bytes().all(|b| b.is_ascii_digit()),
                    "ZINCRBY gave {text}"
                );
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer task");
    }
    for (member, delta) in plans.iter().flatten() {
        *scores.get_mut(member).expect("player") += delta;
    }
    let order = check_campaign(&mut con, &scores).await;

    // Prizes for place 10 and 11 differ: ranks must be exact.
    for (place, member) in order.iter().enumerate().take(30) {
        let rank: Option<usize> = con.zrevrank(CAMPAIGN, member).await.expect("rank");
        assert_eq!(rank, Some(place), "ZREVRANK of {member}");
    }
    let above: usize = con
        .zcount(CAMPAIGN, format!("({}", scores[&order[10]]), "+inf")
        .await
        .expect("ZCOUNT");
    assert_eq!(above, 10, "ZCOUNT above place 11");
}
