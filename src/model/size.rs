//! Volume sizes: Trident's parser (binary suffixes before SI ones) and a human formatter.

use super::attributes::clip;

/// Binary units, tried first: `k`, `ki` and `kib` are all 1024, and so on up to `y`.
const BINARY_UNITS: &[(&[&str], u32)] = &[
    (&["k", "ki", "kib"], 1),
    (&["m", "mi", "mib"], 2),
    (&["g", "gi", "gib"], 3),
    (&["t", "ti", "tib"], 4),
    (&["p", "pi", "pib"], 5),
    (&["e", "ei", "eib"], 6),
    (&["z", "zi", "zib"], 7),
    (&["y", "yi", "yib"], 8),
];

/// SI units, tried second: powers of 1000.
const SI_UNITS: &[(&[&str], u32)] = &[
    (&["b", "bytes"], 0),
    (&["kb"], 1),
    (&["mb"], 2),
    (&["gb"], 3),
    (&["tb"], 4),
    (&["pb"], 5),
    (&["eb"], 6),
    (&["zb"], 7),
    (&["yb"], 8),
];

/// The multiplier of a (lowercase) unit: binary table first, then SI.
fn multiplier(unit: &str) -> Option<u128> {
    let find = |table: &[(&[&str], u32)]| {
        table
            .iter()
            .find(|(names, _)| names.contains(&unit))
            .map(|(_, power)| *power)
    };
    if unit.is_empty() {
        return Some(1);
    }
    if let Some(power) = find(BINARY_UNITS) {
        return Some(1024u128.pow(power));
    }
    find(SI_UNITS).map(|power| 1000u128.pow(power))
}

/// Parses a size string to bytes (docs/trident-contract.md#volume-config): case-insensitive,
/// trimmed, binary suffixes (`k`, `ki`, `kib` … `y`, `yi`, `yib`) before SI ones (`b`, `bytes`,
/// `kb` … `yb`), bare numbers are bytes, integers only. Errors say what is wrong with the value.
///
/// Spaces between the number and the unit are accepted, so `1 GiB` (what [`format_size`]
/// writes) parses back. A leading `+` is accepted as Go's `ParseInt` does; a `-` is refused.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let fail = |why: String| Err(format!("invalid size {:?}: {why}", clip(s)));
    let lower = s.trim().to_ascii_lowercase();
    if lower.is_empty() {
        return fail("the value is empty".to_string());
    }
    // The unit is the trailing run of ASCII letters (never part of a multi-byte character,
    // so the split is on a char boundary); the rest is the number.
    let unit_len = lower
        .bytes()
        .rev()
        .take_while(u8::is_ascii_alphabetic)
        .count();
    let (number, unit) = lower.split_at(lower.len() - unit_len);
    let number = number.trim_end();
    let Some(mult) = multiplier(unit) else {
        return fail(format!(
            "unknown unit {:?} (use e.g. Ki, Mi, Gi, Ti for powers of 1024 or KB, MB, GB, TB \
             for powers of 1000)",
            clip(unit)
        ));
    };
    let digits = match number.as_bytes().first() {
        None => return fail("there is no number".to_string()),
        Some(b'-') => return fail("a size must not be negative".to_string()),
        Some(b'+') => &number[1..],
        Some(_) => number,
    };
    if digits.contains('.') {
        return fail("only whole numbers are allowed".to_string());
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return fail(format!("{:?} is not a whole number", clip(number)));
    }
    let too_big = || format!("larger than the maximum of {} bytes", u64::MAX);
    // At most 38 significant digits always fit in a u128; more are certainly too big.
    let significant = digits.trim_start_matches('0');
    if significant.len() > 38 {
        return fail(too_big());
    }
    let value: u128 = significant
        .bytes()
        .fold(0, |acc, b| acc * 10 + u128::from(b - b'0'));
    match value.checked_mul(mult).and_then(|b| u64::try_from(b).ok()) {
        Some(bytes) => Ok(bytes),
        None => fail(too_big()),
    }
}

/// The unit spellings a request may use ([`parse_size_strict`]): binary (`Ki`, `KiB` and
/// Trident's `K`, up to exa), SI (`KB` … `EB`) and `B`.
const STRICT_UNITS: &[&str] = &[
    "B", "K", "Ki", "KiB", "KB", "M", "Mi", "MiB", "MB", "G", "Gi", "GiB", "GB", "T", "Ti", "TiB",
    "TB", "P", "Pi", "PiB", "PB", "E", "Ei", "EiB", "EB",
];

/// Parses a size as a request must write it: decimal digits, then at most one unit spelled
/// exactly as one of [`STRICT_UNITS`] (`1Gi`, `1GiB`, `1G`, `1GB`, `512`): no spaces, no
/// sign, no other case (`1gi` is refused, naming the spelling to use). Binary units are
/// powers of 1024 and SI units powers of 1000, as in [`parse_size`].
pub fn parse_size_strict(s: &str) -> Result<u64, String> {
    let fail = |why: String| Err(format!("invalid size {:?}: {why}", clip(s)));
    if s.is_empty() {
        return fail("the value is empty".to_string());
    }
    if s.chars().any(char::is_whitespace) {
        return fail("spaces are not allowed (write e.g. 10Gi)".to_string());
    }
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = s.split_at(digits);
    if number.is_empty() {
        // `parse_size` names the problem (a sign, a fraction, no number…).
        return match parse_size(s) {
            Err(e) => Err(e),
            Ok(_) => fail("it must start with a whole number".to_string()),
        };
    }
    if !unit.is_empty() && !STRICT_UNITS.contains(&unit) {
        if let Some(spelled) = STRICT_UNITS
            .iter()
            .find(|u| u.eq_ignore_ascii_case(unit) && unit.bytes().all(|b| b.is_ascii_alphabetic()))
        {
            return fail(format!("the unit is spelled {spelled:?}"));
        }
        return parse_size(s).and_then(|_| {
            Err(format!(
                "invalid size {:?}: unknown unit {:?} (use e.g. Ki, Mi, Gi, Ti for powers of 1024 \
                 or KB, MB, GB, TB for powers of 1000)",
                clip(s),
                clip(unit)
            ))
        });
    }
    parse_size(s)
}

/// The one way a size is stored: the unit, binary or SI, that divides it exactly with the
/// smallest number (`1Gi`, `1536Mi`, `2GB`, `1000Ki`), else bytes (`1000001`).
pub fn canonical_size(bytes: u64) -> String {
    const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    const SI: [&str; 6] = ["KB", "MB", "GB", "TB", "PB", "EB"];
    let mut best = (bytes, "");
    for power in 1..=6u32 {
        for (unit, name) in [
            (1u64 << (10 * power), BINARY[power as usize - 1]),
            (1000u64.pow(power), SI[power as usize - 1]),
        ] {
            if bytes != 0 && bytes.is_multiple_of(unit) && bytes / unit < best.0 {
                best = (bytes / unit, name);
            }
        }
    }
    format!("{}{}", best.0, best.1)
}

/// Formats bytes in IEC units for people: `1 GiB`, `1.5 MiB`, `512 B`. At most one decimal,
/// rounded half up, and a trailing `.0` is dropped.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut power = 0;
    while power + 1 < UNITS.len() && bytes >= 1u64 << (10 * (power + 1)) {
        power += 1;
    }
    if power == 0 {
        return format!("{bytes} B");
    }
    // Tenths of the unit, rounded half up; if rounding reaches 1024 units, step up a unit.
    let tenths_of = |power: usize| {
        let unit = 1u128 << (10 * power);
        (u128::from(bytes) * 10 + unit / 2) / unit
    };
    let mut tenths = tenths_of(power);
    if tenths >= 10240 && power + 1 < UNITS.len() {
        power += 1;
        tenths = tenths_of(power);
    }
    let (whole, frac) = (tenths / 10, tenths % 10);
    if frac == 0 {
        format!("{whole} {}", UNITS[power])
    } else {
        format!("{whole}.{frac} {}", UNITS[power])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each input parses to its size, or fails with a message holding the wanted words.
    fn check_table(parse: fn(&str) -> Result<u64, String>, cases: &[(&str, Result<u64, &str>)]) {
        for (input, want) in cases {
            match (parse(input), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{input:?}"),
                (Err(got), Err(want)) => {
                    assert!(got.contains(want), "{input:?}: {got}");
                    assert!(got.starts_with("invalid size \""), "{input:?}: {got}");
                }
                (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    const KI: u64 = 1 << 10;
    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;
    const TI: u64 = 1 << 40;
    const PI: u64 = 1 << 50;
    const EI: u64 = 1 << 60;

    #[test]
    fn parses_every_suffix_family() {
        let binary = [
            ("k", KI),
            ("m", MI),
            ("g", GI),
            ("t", TI),
            ("p", PI),
            ("e", EI),
        ];
        for (letter, mult) in binary {
            for unit in [
                letter.to_string(),
                format!("{letter}i"),
                format!("{letter}ib"),
            ] {
                for spelled in [unit.clone(), unit.to_uppercase()] {
                    assert_eq!(
                        parse_size(&format!("3{spelled}")),
                        Ok(3 * mult),
                        "3{spelled}"
                    );
                }
            }
        }
        let si = [
            ("b", 1),
            ("bytes", 1),
            ("kb", 1_000),
            ("mb", 1_000_000),
            ("gb", 1_000_000_000),
            ("tb", 1_000_000_000_000),
            ("pb", 1_000_000_000_000_000),
            ("eb", 1_000_000_000_000_000_000),
        ];
        for (unit, mult) in si {
            for spelled in [unit.to_string(), unit.to_uppercase()] {
                assert_eq!(
                    parse_size(&format!("3{spelled}")),
                    Ok(3 * mult),
                    "3{spelled}"
                );
            }
        }
        // Zetta and yotta exist, but only zero of them fits in 64 bits.
        for unit in ["z", "zi", "zib", "y", "yi", "yib", "zb", "yb"] {
            assert_eq!(parse_size(&format!("0{unit}")), Ok(0), "0{unit}");
            assert!(
                parse_size(&format!("1{unit}"))
                    .unwrap_err()
                    .contains("larger than")
            );
        }
    }

    #[test]
    fn parse_table() {
        let cases: &[(&str, Result<u64, &str>)] = &[
            // Binary before SI: 1G is 1024³, 1GB is 1000³.
            ("1G", Ok(GI)),
            ("1Gi", Ok(GI)),
            ("1GiB", Ok(GI)),
            ("1GB", Ok(1_000_000_000)),
            ("1gb", Ok(1_000_000_000)),
            ("1gIb", Ok(GI)),
            ("1Bytes", Ok(1)),
            ("1B", Ok(1)),
            // Bare numbers are bytes.
            ("0", Ok(0)),
            ("1073741824", Ok(GI)),
            ("18446744073709551615", Ok(u64::MAX)),
            ("0000000000000000000000000000000000000000000042", Ok(42)),
            ("+5Mi", Ok(5 * MI)),
            // Whitespace around, and between the number and the unit.
            ("  20Gi\t\n", Ok(20 * GI)),
            ("1 GiB", Ok(GI)),
            ("512 B", Ok(512)),
            ("16EiB", Err("larger than")),
            ("15EiB", Ok(15 * EI)),
            ("18446744073709551616", Err("larger than")),
            (
                "99999999999999999999999999999999999999999999999",
                Err("larger than"),
            ),
            ("20000000000Gi", Err("larger than")),
            // Errors.
            ("", Err("the value is empty")),
            ("   ", Err("the value is empty")),
            ("Gi", Err("there is no number")),
            ("-1", Err("must not be negative")),
            ("-1Gi", Err("must not be negative")),
            ("1.5Gi", Err("only whole numbers")),
            ("1.0", Err("only whole numbers")),
            ("1,5G", Err("is not a whole number")),
            ("1e9", Err("is not a whole number")),
            ("1 0Gi", Err("is not a whole number")),
            ("+", Err("is not a whole number")),
            ("1x", Err("unknown unit \"x\"")),
            ("1kbytes", Err("unknown unit")),
            ("1bi", Err("unknown unit")),
            ("1Ğ", Err("is not a whole number")),
            ("ĞGi", Err("is not a whole number")),
        ];
        check_table(parse_size, cases);
    }

    #[test]
    fn errors_name_the_value_but_clip_it() {
        assert_eq!(
            parse_size("1.5Gi").unwrap_err(),
            "invalid size \"1.5Gi\": only whole numbers are allowed"
        );
        let huge = format!("{}x", "1".repeat(100_000));
        assert!(parse_size(&huge).unwrap_err().len() < 300);
    }

    #[test]
    fn format_table() {
        let cases = [
            (0, "0 B"),
            (1, "1 B"),
            (512, "512 B"),
            (1023, "1023 B"),
            (KI, "1 KiB"),
            (1536, "1.5 KiB"),
            (MI, "1 MiB"),
            (MI + MI / 2, "1.5 MiB"),
            (GI, "1 GiB"),
            (GI + GI / 2, "1.5 GiB"),
            (20 * GI, "20 GiB"),
            (GI + GI / 20 + 1, "1.1 GiB"), // just over 1.05 rounds up
            (GI + GI / 20, "1 GiB"),       // just under 1.05 rounds down
            (GI + GI / 100, "1 GiB"),      // 1.01 rounds to 1.0, shown as 1
            (1_000_000_000, "953.7 MiB"),
            (MI - 1, "1 MiB"), // 1023.999 KiB rounds up into the next unit
            (TI, "1 TiB"),
            (PI * 3, "3 PiB"),
            (EI, "1 EiB"),
            (u64::MAX, "16 EiB"),
        ];
        for (bytes, want) in cases {
            assert_eq!(format_size(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn whole_formatted_sizes_parse_back() {
        for bytes in [0, 1, 512, KI, 3 * MI, 20 * GI, 7 * TI, EI] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
    }

    #[test]
    fn strict_sizes() {
        let cases: &[(&str, Result<u64, &str>)] = &[
            ("1Gi", Ok(GI)),
            ("1GiB", Ok(GI)),
            ("1G", Ok(GI)),
            ("1GB", Ok(1_000_000_000)),
            ("512", Ok(512)),
            ("512B", Ok(512)),
            ("20Mi", Ok(20 * MI)),
            (" 1Gi", Err("spaces are not allowed")),
            ("1Gi ", Err("spaces are not allowed")),
            ("1 Gi", Err("spaces are not allowed")),
            ("1gi", Err("the unit is spelled \"Gi\"")),
            ("1gb", Err("the unit is spelled \"GB\"")),
            ("1KIB", Err("the unit is spelled \"KiB\"")),
            ("1bytes", Err("unknown unit")),
            ("1x", Err("unknown unit")),
            ("1.5Gi", Err("only whole numbers")),
            ("+1Gi", Err("must start with a whole number")),
            ("-1Gi", Err("must not be negative")),
            ("Gi", Err("there is no number")),
            ("", Err("the value is empty")),
            ("16Ei", Err("larger than")),
            ("1Ğ", Err("is not a whole number")),
        ];
        check_table(parse_size_strict, cases);
    }

    #[test]
    fn canonical_table() {
        let cases = [
            (1, "1"),
            (1000, "1KB"),
            (1024, "1Ki"),
            (GI, "1Gi"),
            (1536 * MI, "1536Mi"),
            (1_000_000_000, "1GB"),
            (2_000_000_000, "2GB"),
            (1_500_000_000, "1500MB"),
            (1_000_001, "1000001"),
            (1_024_000, "1000Ki"),
            (3 * EI, "3Ei"),
            (u64::MAX, "18446744073709551615"),
        ];
        for (bytes, want) in cases {
            assert_eq!(canonical_size(bytes), want, "{bytes}");
        }
    }

    proptest::proptest! {
        #[test]
        fn canonical_sizes_parse_back_strictly(bytes in 1u64..) {
            proptest::prop_assert_eq!(parse_size_strict(&canonical_size(bytes)), Ok(bytes));
        }

        #[test]
        fn strict_never_panics(s in "\\PC{0,40}") {
            let _ = parse_size_strict(&s);
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = parse_size(&s);
        }

        #[test]
        fn number_times_unit(n in 0u64..1 << 20, unit in 0usize..6, spelling in 0usize..3) {
            let (names, power) = BINARY_UNITS[unit];
            let want = n.checked_mul(1u64 << (10 * power));
            proptest::prop_assert_eq!(parse_size(&format!(" {n}{} ", names[spelling])).ok(), want);
            let si = SI_UNITS[unit + 1];
            let want = n.checked_mul(1000u64.pow(si.1));
            proptest::prop_assert_eq!(parse_size(&format!("{n}{}", si.0[0].to_uppercase())).ok(), want);
        }

        #[test]
        fn formatted_is_close(bytes in proptest::num::u64::ANY) {
            let shown = format_size(bytes);
            let (number, unit) = shown.split_once(' ').unwrap();
            let power = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
                .iter()
                .position(|u| *u == unit)
                .unwrap();
            let value: f64 = number.parse().unwrap();
            let approx = value * (1u64 << (10 * power)) as f64;
            // Within half a tenth of the unit.
            let err = (approx - bytes as f64).abs() / (1u64 << (10 * power)) as f64;
            proptest::prop_assert!(err <= 0.0501, "{bytes} shown as {shown}");
        }
    }
}
