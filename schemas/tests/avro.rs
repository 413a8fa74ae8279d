//! The Avro schemas of `schemas/avro/` against their golden files: each example value
//! encodes to exactly the bytes an outside reader was shown (`examples/*.hex`) and reads
//! back to itself; and every schema reads every released version of itself. (An Avro
//! map's entries are written in no set order, so the examples' maps have one entry.)

use std::path::{Path, PathBuf};

use apache_avro::schema::Schema;
use apache_avro::schema_compatibility::SchemaCompatibility;
use schemas::avro::{ALL, MAGIC};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("avro")
}

#[test]
fn each_example_round_trips_through_its_golden_bytes() {
    for s in ALL {
        let example = dir().join("examples").join(format!("{}.json", s.name));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&example).unwrap()).unwrap();
        let bytes = s.codec().encode(&json).unwrap();
        assert_eq!(bytes[..2], MAGIC);
        assert_eq!(bytes[2..10], s.codec().fingerprint());
        let golden = example.with_extension("hex");
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        if std::env::var_os("CLAIMS_UPDATE_GOLDEN").is_some() {
            std::fs::write(&golden, format!("{hex}\n")).unwrap();
        }
        let expected = std::fs::read_to_string(&golden)
            .unwrap_or_else(|_| panic!("{} is missing", golden.display()));
        assert_eq!(hex, expected.trim(), "{} encodes differently", s.name);
        assert_eq!(s.codec().decode(&bytes).unwrap(), json, "{}", s.name);
    }
}

#[test]
fn every_schema_reads_every_released_version_of_itself() {
    for s in ALL {
        let current = Schema::parse_str(s.avsc).unwrap();
        assert!(!s.history.is_empty(), "{} has no released version", s.name);
        for (n, old) in s.history.iter().enumerate() {
            let old = Schema::parse_str(old).unwrap();
            if let Err(e) = SchemaCompatibility::can_read(&old, &current) {
                panic!("{} cannot read its version {}: {e}", s.name, n + 1);
            }
        }
        // What a deployed service writes is always a released version: a change to a
        // schema is released as a new file in history/.
        let latest = Schema::parse_str(s.history.last().unwrap()).unwrap();
        assert_eq!(
            latest.canonical_form(),
            current.canonical_form(),
            "{} changed without a new version in history/",
            s.name
        );
    }
}

#[test]
fn every_schema_file_is_known_to_the_codec() {
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".avsc").map(str::to_owned))
        .filter(|f| f != "key")
        .collect();
    files.sort();
    let mut known: Vec<String> = ALL.iter().map(|s| s.name.to_owned()).collect();
    known.sort();
    assert_eq!(files, known);
}
