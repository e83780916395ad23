//! Property tests: random sequences of every hash operation run against a
//! plain model (a HashMap plus the fields' insertion order), with lengths,
//! values, contents, the `listpack` order, the encoding, HSCAN completeness
//! (with changes between its steps) and random picks compared after each
//! step, across both encodings and the conversion between them, with fields
//! written both as shared names and as bytes.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Set(Vec<u8>, Vec<u8>),
    SetNx(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    IncrBy(Vec<u8>, i64),
    IncrByFloat(Vec<u8>, f64),
    /// One HSCAN step with this COUNT (a scan in progress continues).
    ScanStep(usize),
    /// The random picks, with this count.
    Random(usize),
}

/// What the hash should hold, and in which encoding.
struct Model {
    map: HashMap<Vec<u8>, Vec<u8>>,
    /// Present fields in insertion order (an overwrite keeps the place).
    order: Vec<Vec<u8>>,
    listpack: bool,
    limits: HashLimits,
}

impl Model {
    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let lim = self.limits;
        if field.len() > lim.max_listpack_value || value.len() > lim.max_listpack_value {
            self.listpack = false;
        }
        let added = self.map.insert(field.to_vec(), value.to_vec()).is_none();
        if added {
            self.order.push(field.to_vec());
        }
        if self.map.len() > lim.max_listpack_entries {
            self.listpack = false;
        }
        added
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let had = self.map.remove(field).is_some();
        self.order.retain(|f| f != field);
        had
    }
}

/// An HSCAN iteration in progress.
struct Scan {
    cursor: u64,
    seen: HashSet<Vec<u8>>,
    /// Fields present since the scan began: each must come back.
    stable: HashSet<Vec<u8>>,
}

fn field() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => "[a-h]{0,2}".prop_map(String::into_bytes),
        // Enough distinct fields to pass the default entry limit.
        3 => "f[0-9]{1,3}".prop_map(String::into_bytes),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
        // Lengths around the small limits, few distinct.
        1 => (0u8..3, 10usize..24).prop_map(|(c, n)| vec![b'x' + c; n]),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (-50i64..50).prop_map(|n| n.to_string().into_bytes()),
        any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        prop_oneof![
            Just("1.5"),
            Just("-0"),
            Just("01"),
            Just(""),
            Just("abc"),
            Just("1e3"),
            Just("inf"),
            Just("9223372036854775807"),
        ]
        .prop_map(|s| s.as_bytes().to_vec()),
        "-?[0-9]{1,3}\\.[0-9]{1,3}".prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (field(), value()).prop_map(|(f, v)| Op::Set(f, v)),
        2 => (field(), value()).prop_map(|(f, v)| Op::SetNx(f, v)),
        4 => field().prop_map(Op::Remove),
        2 => (field(), prop_oneof![-5i64..5, any::<i64>()]).prop_map(|(f, n)| Op::IncrBy(f, n)),
        2 => (field(), prop_oneof![-100.0f64..100.0, Just(1.7e308), Just(0.1)])
            .prop_map(|(f, x)| Op::IncrByFloat(f, x)),
        3 => (1usize..5).prop_map(Op::ScanStep),
        1 => (0usize..12).prop_map(Op::Random),
    ]
}

fn check_contents(h: &HashValue, m: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(h.len(), m.map.len());
    prop_assert_eq!(
        h.encoding(),
        if m.listpack { "listpack" } else { "hashtable" }
    );
    let all: Vec<(Vec<u8>, Vec<u8>)> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
    prop_assert_eq!(all.len(), m.map.len());
    let as_map: HashMap<Vec<u8>, Vec<u8>> = all.iter().cloned().collect();
    prop_assert_eq!(&as_map, &m.map);
    if m.listpack {
        let fields: Vec<Vec<u8>> = all.into_iter().map(|(f, _)| f).collect();
        prop_assert_eq!(&fields, &m.order);
    }
    prop_assert_eq!(h.keys().count(), m.map.len());
    prop_assert_eq!(h.values().count(), m.map.len());
    Ok(())
}

/// One HSCAN step; returns whether the iteration finished (and was
/// checked).
fn scan_step(
    h: &HashValue,
    m: &Model,
    scan: &mut Scan,
    count: usize,
) -> Result<bool, TestCaseError> {
    let mut wrong = None;
    scan.cursor = h.scan(scan.cursor, count, |f, v| {
        if m.map.get(f).map(Vec::as_slice) != Some(v) {
            wrong = Some((f.to_vec(), v.to_vec()));
        }
        scan.seen.insert(f.to_vec());
    });
    prop_assert_eq!(wrong, None, "scan emitted a pair the hash does not hold");
    if scan.cursor != 0 {
        prop_assert!(!m.listpack, "a listpack scan takes one step");
        return Ok(false);
    }
    let missed: Vec<&Vec<u8>> = scan.stable.difference(&scan.seen).collect();
    prop_assert!(missed.is_empty(), "scan missed {:?}", missed);
    Ok(true)
}

fn check_random(
    h: &HashValue,
    m: &Model,
    count: usize,
    rng: &mut StdRng,
) -> Result<(), TestCaseError> {
    match h.random_field(rng) {
        Some((f, v)) => prop_assert_eq!(m.map.get(f).map(Vec::as_slice), Some(&*v)),
        None => prop_assert!(m.map.is_empty()),
    }
    let picked = h.random_distinct(count, rng);
    prop_assert_eq!(picked.len(), count.min(m.map.len()));
    let distinct: HashSet<&[u8]> = picked.iter().map(|&(f, _)| f).collect();
    prop_assert_eq!(distinct.len(), picked.len());
    for (f, v) in &picked {
        prop_assert_eq!(m.map.get(*f).map(Vec::as_slice), Some(&**v));
    }
    if m.listpack {
        // A listpack gives its picks in its own order.
        let positions: Vec<usize> = picked
            .iter()
            .filter_map(|&(f, _)| m.order.iter().position(|o| o == f))
            .collect();
        prop_assert!(positions.windows(2).all(|w| w[0] < w[1]));
    }
    let mut emitted = 0;
    let mut bad = false;
    h.random_with_repeats(count, rng, |f, v| {
        emitted += 1;
        bad |= m.map.get(f).map(Vec::as_slice) != Some(v);
    });
    prop_assert!(!bad);
    prop_assert_eq!(emitted, if m.map.is_empty() { 0 } else { count });
    Ok(())
}

fn check_against_model(ops: &[Op], limits: HashLimits, seed: u64) -> Result<(), TestCaseError> {
    // Some fields the strategies make are shared names from the start, so
    // listpacks mix pairs written with a name's id and with the field's
    // bytes (others get in as the cases repeat them).
    for name in ["ab", "ba", "cd", "hh", "f1", "f22", "f333"] {
        field_names::admit(name.as_bytes());
    }
    let mut h = HashValue::new();
    let mut m = Model {
        map: HashMap::new(),
        order: Vec::new(),
        listpack: true,
        limits,
    };
    let mut scan: Option<Scan> = None;
    let mut rng = StdRng::seed_from_u64(seed);
    for o in ops {
        match o {
            Op::Set(f, v) => prop_assert_eq!(h.set(f, v, limits), m.set(f, v)),
            Op::SetNx(f, v) => {
                let want = !m.map.contains_key(f) && m.set(f, v);
                prop_assert_eq!(h.set_nx(f, v, limits), want);
            }
            Op::Remove(f) => {
                if let Some(s) = &mut scan {
                    s.stable.remove(f);
                }
                prop_assert_eq!(h.remove(f), m.remove(f));
            }
            Op::IncrBy(f, n) => {
                let want = match m.map.get(f) {
                    Some(v) => parse_i64(v).ok_or(HashError::NotAnInteger),
                    None => Ok(0),
                }
                .and_then(|old| old.checked_add(*n).ok_or(HashError::Overflow));
                if let Ok(new) = want {
                    m.set(f, new.to_string().as_bytes());
                }
                prop_assert_eq!(h.incr_by(f, *n, limits), want);
            }
            Op::IncrByFloat(f, x) => {
                let want = match m.map.get(f) {
                    Some(v) => <f64 as HashFloat>::parse(v).ok_or(HashError::NotAFloat),
                    None => Ok(0.0),
                }
                .and_then(|old| {
                    let sum = old + x;
                    if sum.is_finite() {
                        Ok(sum.format())
                    } else {
                        Err(HashError::NanOrInfinity)
                    }
                });
                if let Ok(bytes) = &want {
                    m.set(f, bytes);
                }
                prop_assert_eq!(h.incr_by_float(f, *x, limits), want);
            }
            Op::ScanStep(count) => {
                let s = scan.get_or_insert_with(|| Scan {
                    cursor: 0,
                    seen: HashSet::new(),
                    stable: m.map.keys().cloned().collect(),
                });
                if scan_step(&h, &m, s, *count)? {
                    scan = None;
                }
            }
            Op::Random(count) => check_random(&h, &m, *count, &mut rng)?,
        }
        prop_assert_eq!(h.len(), m.map.len());
        prop_assert_eq!(
            h.encoding(),
            if m.listpack { "listpack" } else { "hashtable" }
        );
        if let Op::Set(f, _) | Op::SetNx(f, _) | Op::Remove(f) | Op::IncrBy(f, _) = o {
            let got = h.get(f);
            prop_assert_eq!(got.as_deref(), m.map.get(f).map(Vec::as_slice));
            prop_assert_eq!(h.contains(f), m.map.contains_key(f));
            prop_assert_eq!(h.strlen(f), m.map.get(f).map_or(0, Vec::len));
        }
        check_contents(&h, &m)?;
    }
    // Finish a scan left in progress, then run a whole one from the start.
    if let Some(mut s) = scan.take() {
        while !scan_step(&h, &m, &mut s, 2)? {}
    }
    let mut whole = Scan {
        cursor: 0,
        seen: HashSet::new(),
        stable: m.map.keys().cloned().collect(),
    };
    while !scan_step(&h, &m, &mut whole, 1)? {}
    for f in m.map.keys() {
        prop_assert!(h.contains(f));
    }
    check_random(&h, &m, m.map.len() / 2, &mut rng)?;
    check_random(&h, &m, m.map.len() + 1, &mut rng)?;
    let copy = h.duplicate();
    check_contents(&copy, &m)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_model_with_small_limits(
        ops in proptest::collection::vec(op(), 0..250),
        entries in 0usize..8,
        value_len in 0usize..20,
        seed in any::<u64>(),
    ) {
        let limits = HashLimits { max_listpack_entries: entries, max_listpack_value: value_len };
        check_against_model(&ops, limits, seed)?;
    }

    #[test]
    fn matches_model_with_default_limits(
        ops in proptest::collection::vec(op(), 0..400),
        seed in any::<u64>(),
    ) {
        check_against_model(&ops, HashLimits::default(), seed)?;
    }
}
