//! Volume sizes: Trident's parser (binary suffixes before SI ones) and a human formatter.

/// Parses a size string to bytes (trident-compat §2.3): case-insensitive, trimmed, binary
/// suffixes (`k`, `ki`, `kib` … `y`, `yi`, `yib`) before SI ones (`b`, `bytes`, `kb` … `yb`),
/// bare numbers are bytes, integers only. Errors say what is wrong with the value.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let _ = s;
    todo!()
}

/// Formats bytes in IEC units for people: `1 GiB`, `1.5 MiB`, `512 B`.
pub fn format_size(bytes: u64) -> String {
    let _ = bytes;
    todo!()
}
