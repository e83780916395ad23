//! The README's command table names every command Rostrum serves.

use rostrum::commands::table::table;

#[test]
fn readme_lists_every_command() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme
        .find("## Supported commands")
        .expect("a Supported commands section");
    let end = readme[start + 3..]
        .find("\n## ")
        .map(|e| e + start + 3)
        .unwrap_or(readme.len());
    let section = &readme[start..end];
    let words: std::collections::HashSet<String> = section
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        // `.` belongs to module-style names (LB.TOP), not to a sentence's end.
        .map(|w| w.trim_end_matches('.').to_ascii_uppercase())
        .collect();
    let mut missing: Vec<String> = table()
        .iter()
        .map(|c| c.spec.name.to_ascii_uppercase())
        .filter(|n| !words.contains(n))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "README's command table misses: {missing:?}"
    );
}
