//! Random datasets written as an RDB file and read back equal, under
//! default and tiny encoding limits (so both the compact and the big
//! encoding of every type are written), with and without compression.

use proptest::prelude::*;

use super::decode::payload_value;
use super::decode::read_file;
use super::encode::{dump_payload, write_eof, write_key, write_len, write_magic, EncodeOptions};
use super::{crc64::crc64, opcodes, Limits};
use crate::engine::hash::{HashLimits, HashValue};
use crate::engine::list::{ListLimits, ListValue};
use crate::engine::set::SetValue;
use crate::engine::stream::{Group, Stream, StreamId};
use crate::engine::string::StrValue;
use crate::engine::zset::{ZSet, ZSetLimits};
use crate::engine::Value;

/// A value as plain data, for comparing.
#[derive(Debug, Clone, PartialEq)]
enum Model {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

fn model_of(v: &Value) -> Model {
    match v {
        Value::Str(s) => Model::Str(s.as_bytes().to_vec()),
        Value::List(l) => Model::List(l.iter().map(|e| e.to_vec()).collect()),
        Value::Set(s) => {
            let mut m: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
            m.sort();
            Model::Set(m)
        }
        Value::ZSet(z) => Model::ZSet(z.iter().map(|(m, s)| (m.to_vec(), s)).collect()),
        Value::Hash(h) => {
            let mut m: Vec<(Vec<u8>, Vec<u8>)> =
                h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            m.sort();
            Model::Hash(m)
        }
        Value::Leaderboard(_) => Model::Str(b"leaderboard".to_vec()),
        Value::Stream(st) => {
            // Entries and counters; groups as their Debug form (plain maps).
            let mut text = format!(
                "{:?} {:?} {} {:?}",
                st.last_id, st.max_deleted_id, st.entries_added, st.groups
            );
            st.for_each_in(StreamId::MIN, StreamId::MAX, false, |id, f| {
                text.push_str(&format!(" {id:?}={f:?}"));
                true
            });
            Model::Str(text.into_bytes())
        }
    }
}

/// A stream with deleted entries, two groups, consumers and pending
/// entries comes back from Rostrum's stream record the same.
#[test]
fn a_stream_with_groups_round_trips() {
    let mut st = Stream::new();
    for i in 1..=250u64 {
        let n = i.to_string();
        st.append(
            StreamId::new(1000 + i, i % 3),
            &[b"user", n.as_bytes(), b"n", b"1"],
        );
    }
    assert!(st.delete(StreamId::new(1010, 1)));
    st.last_id = StreamId::new(9999, 7);
    let mut g = Group::new(StreamId::new(1100, 1), Some(90));
    g.create_consumer(b"alice", 5);
    g.create_consumer(b"idle", 6);
    g.assign(StreamId::new(1050, 0), b"alice", 77, 3);
    g.assign(StreamId::new(1060, 0), b"alice", 78, 1);
    st.groups.insert(b"g1".to_vec(), g);
    st.groups
        .insert(b"g2".to_vec(), Group::new(StreamId::MIN, None));
    let v = Value::Stream(Box::new(st));
    let payload = dump_payload(&v, EncodeOptions::default());
    let back = payload_value(&payload, &Limits::default())
        .expect("read")
        .expect("a value");
    assert_eq!(model_of(&back), model_of(&v));
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        (0u32..300).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..40),
        (1usize..200).prop_map(|n| b"ab".repeat(n)),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1000i64..1000).prop_map(|n| n as f64),
        any::<f64>().prop_filter("no NaN", |f| !f.is_nan()),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        (-1e6f64..1e6),
    ]
}

fn model() -> impl Strategy<Value = Model> {
    prop_oneof![
        bytes().prop_map(Model::Str),
        proptest::collection::vec(bytes(), 1..60).prop_map(Model::List),
        proptest::collection::btree_set(bytes(), 1..40)
            .prop_map(|s| Model::Set(s.into_iter().collect())),
        proptest::collection::btree_map(bytes(), score(), 1..40)
            .prop_map(|m| Model::ZSet(m.into_iter().collect())),
        proptest::collection::btree_map(bytes(), bytes(), 1..40)
            .prop_map(|m| Model::Hash(m.into_iter().collect())),
    ]
}

fn build(m: &Model, lim: &Limits) -> Value {
    match m {
        Model::Str(b) => Value::Str(StrValue::from_bytes(b)),
        Model::List(items) => Value::List(Box::new(ListValue::from_values(
            items.iter().map(|v| v.as_slice()),
            lim.list,
        ))),
        Model::Set(items) => Value::Set(Box::new(SetValue::from_members(
            items.iter().map(|v| v.as_slice()),
            lim.max_intset,
        ))),
        Model::ZSet(pairs) => {
            let mut z = ZSet::new();
            for (m, s) in pairs {
                z.insert(m, *s, lim.zset);
            }
            Value::ZSet(z)
        }
        Model::Hash(pairs) => {
            let mut h = HashValue::new();
            for (f, v) in pairs {
                h.set(f, v, lim.hash);
            }
            Value::Hash(h)
        }
    }
}

fn tiny() -> Limits {
    Limits {
        zset: ZSetLimits::new(2, 4),
        hash: HashLimits {
            max_listpack_entries: 2,
            max_listpack_value: 4,
        },
        list: ListLimits {
            max_listpack_size: 2,
        },
        max_intset: 2,
        ..Limits::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_datasets_read_back_equal(
        keys in proptest::collection::vec((0usize..4, bytes(), model(), proptest::option::of(1u64 << 41..1u64 << 42)), 0..12),
        small in any::<bool>(),
        compress in any::<bool>(),
    ) {
        let lim = if small { tiny() } else { Limits::default() };
        let opts = EncodeOptions { compress, list_fill: lim.list.max_listpack_size, archive_refs: false };
        // The last write of a (db, key) wins, as in a keyspace.
        let mut want = std::collections::BTreeMap::new();
        for (db, key, m, ttl) in &keys {
            want.insert((*db, key.clone()), (m.clone(), *ttl));
        }
        let mut file = Vec::new();
        write_magic(&mut file);
        for ((db, key), (m, ttl)) in &want {
            file.push(opcodes::SELECTDB);
            write_len(&mut file, *db as u64);
            write_key(&mut file, key, &build(m, &lim), *ttl, opts);
        }
        write_eof(&mut file);
        let crc = crc64(0, &file);
        file.extend_from_slice(&crc.to_le_bytes());
        let loaded = read_file(&file, 4, 0, &lim).unwrap();
        let got: std::collections::BTreeMap<_, _> = loaded
            .keys
            .iter()
            .map(|k| ((k.db, k.key.clone()), (model_of(&k.value), k.expire_ms)))
            .collect();
        // ZSet members come back in score order; the model is in member order.
        let norm = |m: &Model| match m {
            Model::ZSet(p) => {
                // A listpack keeps -0 as 0, and -0 and 0 tie (member order).
                let mut p: Vec<(Vec<u8>, f64)> = p
                    .iter()
                    .map(|(m, s)| (m.clone(), if *s == 0.0 { 0.0 } else { *s }))
                    .collect();
                p.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                Model::ZSet(p)
            }
            other => other.clone(),
        };
        let want: std::collections::BTreeMap<_, _> = want.iter().map(|(k, (m, t))| (k.clone(), (norm(m), *t))).collect();
        let got: std::collections::BTreeMap<_, _> = got.iter().map(|(k, (m, t))| (k.clone(), (norm(m), *t))).collect();
        prop_assert_eq!(got, want);
        // Any cut of the file is refused, never a panic.
        let cut = file.len() / 2;
        prop_assert!(read_file(&file[..cut], 4, 0, &lim).is_err());
    }
}
