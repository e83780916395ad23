//! Property tests: random appends, deletes, exact and approximate trims
//! run against a plain BTreeMap model; contents, length, ranges (both
//! directions, with counts) and lookups are compared after each step.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

type Fields = Vec<Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    /// Append after the last id: ms gap, seq, fields (names from a small
    /// pool so blocks share and do not share master names).
    Append(u64, u64, Vec<(u8, Vec<u8>)>),
    Delete(usize),
    MaxLen(u64, bool),
    MinId(usize, bool),
    Range(usize, usize, bool, Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u64..3, 0u64..4, prop::collection::vec((0u8..3, prop::collection::vec(any::<u8>(), 0..6)), 1..4))
            .prop_map(|(g, s, f)| Op::Append(g, s, f)),
        2 => any::<usize>().prop_map(Op::Delete),
        1 => (0u64..300, any::<bool>()).prop_map(|(n, a)| Op::MaxLen(n, a)),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, a)| Op::MinId(i, a)),
        2 => (any::<usize>(), any::<usize>(), any::<bool>(), prop::option::of(0usize..20))
            .prop_map(|(a, b, r, c)| Op::Range(a, b, r, c)),
    ]
}

fn pick(model: &BTreeMap<StreamId, Fields>, i: usize) -> StreamId {
    if model.is_empty() {
        return StreamId::new(i as u64 % 7, 0);
    }
    *model.keys().nth(i % model.len()).unwrap_or(&StreamId::MIN)
}

fn all(s: &Stream) -> Vec<(StreamId, Fields)> {
    s.range(StreamId::MIN, StreamId::MAX, false, None)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn stream_matches_a_btreemap(ops in prop::collection::vec(op(), 1..400)) {
        let mut s = Stream::new();
        let mut model: BTreeMap<StreamId, Fields> = BTreeMap::new();
        let mut last = StreamId::MIN;
        for op in ops {
            match op {
                Op::Append(gap, seq, fields) => {
                    let id = if gap == 0 {
                        StreamId::new(last.ms, last.seq + 1 + seq)
                    } else {
                        StreamId::new(last.ms + gap * 1000, seq)
                    };
                    let flat: Fields = fields
                        .iter()
                        .flat_map(|(n, v)| [vec![b'f', *n], v.clone()])
                        .collect();
                    let refs: Vec<&[u8]> = flat.iter().map(|f| f.as_slice()).collect();
                    s.append(id, &refs);
                    model.insert(id, flat);
                    last = id;
                }
                Op::Delete(i) => {
                    let id = pick(&model, i);
                    prop_assert_eq!(s.delete(id), model.remove(&id).is_some());
                }
                Op::MaxLen(n, approx) => {
                    let before = model.len() as u64;
                    let removed = s.trim(Trim::MaxLen(n), approx, 0);
                    let keep = before - removed;
                    if approx {
                        prop_assert!(keep >= n.min(before));
                    } else {
                        prop_assert_eq!(keep, n.min(before));
                    }
                    while model.len() as u64 > keep {
                        model.pop_first();
                    }
                }
                Op::MinId(i, approx) => {
                    let min = pick(&model, i);
                    let removed = s.trim(Trim::MinId(min), approx, 0);
                    let below = model.range(..min).count() as u64;
                    if approx {
                        prop_assert!(removed <= below);
                    } else {
                        prop_assert_eq!(removed, below);
                    }
                    for _ in 0..removed {
                        model.pop_first();
                    }
                }
                Op::Range(a, b, rev, count) => {
                    let (x, y) = (pick(&model, a), pick(&model, b));
                    let got = s.range(x, y, rev, count);
                    let mut want: Vec<(StreamId, Fields)> = if x <= y {
                        model.range(x..=y).map(|(k, v)| (*k, v.clone())).collect()
                    } else {
                        Vec::new()
                    };
                    if rev {
                        want.reverse();
                    }
                    if let Some(c) = count {
                        want.truncate(c);
                    }
                    prop_assert_eq!(got, want);
                }
            }
            prop_assert_eq!(s.len(), model.len() as u64);
            let want: Vec<(StreamId, Fields)> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
            prop_assert_eq!(all(&s), want);
            prop_assert_eq!(s.first_id(), model.keys().next().copied().unwrap_or(StreamId::MIN));
        }
    }
}

#[test]
fn group_pel_is_indexed_by_id_and_consumer() {
    let mut g = Group::new(StreamId::MIN, Some(0));
    g.assign(StreamId::new(1, 0), b"alice", 10, 1);
    g.assign(StreamId::new(2, 0), b"alice", 10, 1);
    g.assign(StreamId::new(2, 0), b"bob", 20, 2);
    assert_eq!(g.consumers[&b"alice"[..]].pel.len(), 1);
    assert_eq!(g.consumers[&b"bob"[..]].pel.len(), 1);
    assert!(g.ack(StreamId::new(1, 0)));
    assert!(!g.ack(StreamId::new(1, 0)));
    assert_eq!(g.delete_consumer(b"bob"), Some(1));
    assert!(g.pel.is_empty());
}
