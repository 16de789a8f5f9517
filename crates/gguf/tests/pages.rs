//! `GgufFile::release_pages`: a memory-mapped tensor's pages leave the process's resident set
//! and come back, with the same bytes, when read again; bytes that are not the file's are left
//! alone.

#![cfg(target_os = "linux")]

use runahead_gguf::{GgmlType, GgufFile, GgufWriter};

/// The process's resident file-backed memory, in bytes (`RssFile` of /proc/self/status).
fn rss_file() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssFile:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("RssFile in /proc/self/status");
    kb * 1024
}

#[test]
fn released_pages_leave_the_resident_set_and_read_back_the_same() {
    const MB: usize = 1 << 20;
    let bytes: Vec<u8> = (0..16 * MB).map(|i| (i * 7 % 251) as u8).collect();
    let mut w = GgufWriter::new();
    w.meta_str("general.architecture", "llama");
    w.tensor(
        "big",
        &[(bytes.len() / 4) as u64],
        GgmlType::F32,
        bytes.clone(),
    );
    let path = std::env::temp_dir().join(format!("runahead-pages-{}.gguf", std::process::id()));
    std::fs::write(&path, w.to_bytes()).expect("write the test file");
    let file = GgufFile::open(&path).expect("open");
    let info = file.tensor_info("big").expect("tensor").clone();
    let tensor = file.tensor_bytes(&info);
    assert_eq!(tensor, &bytes[..], "mapped bytes");

    let resident = rss_file();
    file.release_pages(tensor);
    let released = rss_file();
    assert!(
        resident - released.min(resident) >= 12 * MB as u64,
        "resident file memory {resident} -> {released} bytes"
    );
    assert_eq!(
        file.tensor_bytes(&info),
        &bytes[..],
        "read back from the file"
    );

    // Not the file's bytes, or none: nothing happens.
    file.release_pages(&bytes);
    file.release_pages(&[]);
    assert_eq!(file.tensor_bytes(&info), &bytes[..]);
    let _ = std::fs::remove_file(&path);
}
