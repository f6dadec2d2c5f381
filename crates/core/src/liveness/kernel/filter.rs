//! The device filter the kernel applies before a sample is written: only
//! flocks on the watched devices cost a sample (one filter per device:
//! the kernel takes an event's filter once), less those on the inodes
//! named as dropped (files known to be no claim's, which flock often).
//!
//! Invariant: devices are written in the kernel's `dev_t` encoding,
//! `major << 20 | minor` (not userspace's `st_dev`), which is what the
//! tracepoint's `s_dev` holds; a device that encoding cannot hold is
//! refused, never truncated into another device. A filter never names
//! more than [`MAX_DROPPED`] inodes, which keeps its text within the page
//! the kernel copies it into (`PERF_EVENT_IOC_SET_FILTER` reads at most
//! one page).

use super::Refused;

/// Bits of the kernel's minor number (`MINORBITS`).
const MINOR_BITS: u32 = 20;

/// The kernel's encoding of `major:minor`.
pub fn encode(major: u32, minor: u32) -> Result<u32, Refused> {
    if major >= 1 << (32 - MINOR_BITS) || minor >= 1 << MINOR_BITS {
        return Err(Refused::DeviceOutOfRange { major, minor });
    }
    Ok(major << MINOR_BITS | minor)
}

/// `major:minor` from the kernel's encoding.
pub fn decode(kernel_dev: u32) -> (u32, u32) {
    (
        kernel_dev >> MINOR_BITS,
        kernel_dev & ((1 << MINOR_BITS) - 1),
    )
}

/// The most inodes one device's filter drops: each costs at most 33
/// bytes of text (` && i_ino != ` and 20 digits), 100 of them 3,300, well
/// within a 4 KiB page with the device's own test.
pub(crate) const MAX_DROPPED: usize = 100;

/// The filter text for one device: `s_dev == N`.
pub(crate) fn for_device(device: (u32, u32)) -> Result<String, Refused> {
    for_device_dropping(device, std::iter::empty())
}

/// The filter text for one device, less `dropped` inodes (at most
/// [`MAX_DROPPED`] of them are named; the others are not dropped):
/// `s_dev == N && i_ino != A && i_ino != B …`. The device's test comes
/// first, so a flock on another device costs the kernel one comparison.
pub(crate) fn for_device_dropping(
    (major, minor): (u32, u32),
    dropped: impl IntoIterator<Item = u64>,
) -> Result<String, Refused> {
    use std::fmt::Write as _;
    let mut text = format!("s_dev == {}", encode(major, minor)?);
    for inode in dropped.into_iter().take(MAX_DROPPED) {
        let _ = write!(text, " && i_ino != {inode}");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_use_the_kernel_encoding() {
        // 254:0 (a virtio disk) is 0xfe00 to userspace, 254 << 20 to the kernel.
        assert_eq!(encode(254, 0).expect("fits"), 254 << 20);
        assert_eq!(decode(254 << 20 | 3), (254, 3));
        assert_eq!(for_device((0, 27)).expect("fits"), "s_dev == 27");
        assert_eq!(for_device((254, 0)).expect("fits"), "s_dev == 266338304");
    }

    #[test]
    fn dropped_inodes_follow_the_device_and_fit_a_page() {
        assert_eq!(
            for_device_dropping((0, 27), [12, 40]).expect("fits"),
            "s_dev == 27 && i_ino != 12 && i_ino != 40"
        );
        let widest = for_device_dropping((4095, (1 << 20) - 1), [u64::MAX; 1000]).expect("fits");
        assert_eq!(widest.matches("i_ino").count(), MAX_DROPPED);
        assert!(widest.len() < 4096, "{} bytes", widest.len());
    }

    #[test]
    fn a_device_the_kernel_cannot_encode_is_refused() {
        let refused = encode(4096, 0).unwrap_err();
        assert!(matches!(
            refused,
            Refused::DeviceOutOfRange { major: 4096, .. }
        ));
        assert!(encode(0, 1 << 20).is_err());
    }
}
