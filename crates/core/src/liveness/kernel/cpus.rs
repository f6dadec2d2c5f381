//! The online CPUs, one perf event and ring each.
//!
//! Invariant: the list is read once, at open; a CPU brought online later
//! has no ring, and its flocks are not seen (CPU hotplug is rare on the
//! machines locktop watches; reopen to cover it).

use std::path::Path;

use super::Refused;

/// Where the kernel lists the online CPUs (`0-3,5`).
pub(crate) const ONLINE: &str = "/sys/devices/system/cpu/online";

/// The online CPUs, in ascending order.
pub(crate) fn online() -> Result<Vec<u32>, Refused> {
    let path = Path::new(ONLINE);
    let unknown = |why: String| Refused::CpusUnknown {
        path: path.to_path_buf(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|error| unknown(error.to_string()))?;
    parse(&text).ok_or_else(|| unknown(format!("cannot parse {:?}", text.trim())))
}

/// Parses a kernel CPU list (`0`, `0-3`, `0-3,5,7-8`); `None` if malformed
/// or empty.
pub fn parse(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for range in list.trim().split(',') {
        let (first, last): (u32, u32) = match range.split_once('-') {
            Some((first, last)) => (first.parse().ok()?, last.parse().ok()?),
            None => {
                let cpu = range.parse().ok()?;
                (cpu, cpu)
            }
        };
        if first > last {
            return None;
        }
        cpus.extend(first..=last);
    }
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse("0\n"), Some(vec![0]));
        assert_eq!(parse("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse(""), None);
        assert_eq!(parse("3-1"), None);
        assert_eq!(parse("x"), None);
    }

    /// This machine's list is readable and names at least one CPU.
    #[test]
    fn this_machine_has_online_cpus() {
        assert!(!super::online().expect("online CPUs").is_empty());
    }
}
