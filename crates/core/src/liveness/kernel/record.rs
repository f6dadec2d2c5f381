//! The records of a perf ring, parsed from their bytes: a sample (its time
//! and raw tracepoint data) or a count of samples the kernel lost.
//!
//! Invariants: the layout parsed is the one the events are opened with
//! (`PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
//! PERF_SAMPLE_CPU | PERF_SAMPLE_RAW`, `sample_id_all` so a lost record
//! carries its time too); a record too short for its type
//! is [`Parsed::Malformed`], never read past its end; record types the
//! reader did not ask for are [`Parsed::Skipped`].

use perf_event_open_sys::bindings::{PERF_RECORD_LOST, PERF_RECORD_SAMPLE};

/// The size of `struct perf_event_header`: type u32, misc u16, size u16.
pub(crate) const HEADER_SIZE: usize = 8;

/// One record, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A tracepoint sample.
    Sample {
        /// `PERF_SAMPLE_IDENTIFIER`: the id of the event that wrote it
        /// (`PERF_EVENT_IOC_ID`).
        id: u64,
        /// `PERF_SAMPLE_TIME`: nanoseconds of the event's clock.
        time: u64,
        /// `PERF_SAMPLE_RAW`: the tracepoint's entry, padding included.
        raw: &'a [u8],
    },
    /// `PERF_RECORD_LOST`: samples the ring had no room for.
    Lost {
        /// When the kernel wrote this record (after the losses).
        time: u64,
        /// How many were lost.
        count: u64,
    },
    /// A record type not asked for.
    Skipped,
    /// A record too short for its type (or a header that cannot be).
    Malformed,
}

/// The size a header says its record has (`None` if `header` is short).
pub(crate) fn size_of_record(header: &[u8]) -> Option<usize> {
    let bytes = header.get(6..8)?;
    Some(usize::from(u16::from_ne_bytes([bytes[0], bytes[1]])))
}

/// Parses one whole record, header included.
pub fn parse(record: &[u8]) -> Parsed<'_> {
    let Some(kind) = u32_at(record, 0) else {
        return Parsed::Malformed;
    };
    match kind {
        PERF_RECORD_SAMPLE => sample(record).unwrap_or(Parsed::Malformed),
        PERF_RECORD_LOST => lost(record).unwrap_or(Parsed::Malformed),
        _ => Parsed::Skipped,
    }
}

/// header, id u64, pid u32, tid u32, time u64, cpu u32, res u32, size
/// u32, raw[size].
fn sample(record: &[u8]) -> Option<Parsed<'_>> {
    let id = u64_at(record, HEADER_SIZE)?;
    let time = u64_at(record, HEADER_SIZE + 16)?;
    let size = u32_at(record, HEADER_SIZE + 32)? as usize;
    let start = HEADER_SIZE + 36;
    let raw = record.get(start..start + size)?;
    Some(Parsed::Sample { id, time, raw })
}

/// header, id u64, lost u64, then sample_id: pid u32, tid u32, time u64,
/// cpu u32, res u32, id u64.
fn lost(record: &[u8]) -> Option<Parsed<'_>> {
    let count = u64_at(record, HEADER_SIZE + 8)?;
    let time = u64_at(record, HEADER_SIZE + 24)?;
    Some(Parsed::Lost { time, count })
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Builders of records as the kernel writes them, for tests.
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    fn header(kind: u32, size: usize) -> Vec<u8> {
        let mut record = kind.to_ne_bytes().to_vec();
        record.extend(0u16.to_ne_bytes());
        record.extend(u16::try_from(size).expect("fits").to_ne_bytes());
        record
    }

    /// A sample record of `raw` by event 3 (whose length keeps the record
    /// 8-aligned, as the kernel's padding does: `len % 8 == 4`).
    pub(crate) fn sample(time: u64, raw: &[u8]) -> Vec<u8> {
        let size = HEADER_SIZE + 36 + raw.len();
        let mut record = header(PERF_RECORD_SAMPLE, size);
        record.extend(3u64.to_ne_bytes());
        record.extend(1u32.to_ne_bytes());
        record.extend(2u32.to_ne_bytes());
        record.extend(time.to_ne_bytes());
        record.extend(0u64.to_ne_bytes());
        record.extend(u32::try_from(raw.len()).expect("fits").to_ne_bytes());
        record.extend(raw);
        record
    }

    /// A lost record with `sample_id_all`.
    pub(crate) fn lost(time: u64, count: u64) -> Vec<u8> {
        let mut record = header(PERF_RECORD_LOST, HEADER_SIZE + 48);
        record.extend(9u64.to_ne_bytes());
        record.extend(count.to_ne_bytes());
        record.extend(1u32.to_ne_bytes());
        record.extend(2u32.to_ne_bytes());
        record.extend(time.to_ne_bytes());
        record.extend(0u64.to_ne_bytes());
        record.extend(9u64.to_ne_bytes());
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_losses_parse() {
        let raw = [7u8; 92];
        let record = build::sample(123, &raw);
        assert_eq!(size_of_record(&record), Some(record.len()));
        assert_eq!(
            parse(&record),
            Parsed::Sample {
                id: 3,
                time: 123,
                raw: &raw
            }
        );
        assert_eq!(
            parse(&build::lost(456, 17)),
            Parsed::Lost {
                time: 456,
                count: 17
            }
        );
    }

    #[test]
    fn short_records_are_malformed_and_others_skipped() {
        let record = build::sample(123, &[7u8; 92]);
        assert_eq!(parse(&record[..record.len() - 1]), Parsed::Malformed);
        assert_eq!(parse(&record[..5]), Parsed::Malformed);
        let mut throttle = record.clone();
        throttle[..4].copy_from_slice(&5u32.to_ne_bytes());
        assert_eq!(parse(&throttle), Parsed::Skipped);
    }
}
