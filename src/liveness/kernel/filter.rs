//! The device filter the kernel applies before a sample is written: only
//! flocks on the watched devices cost a sample (one filter per device:
//! the kernel takes an event's filter once).
//!
//! Invariant: devices are written in the kernel's `dev_t` encoding,
//! `major << 20 | minor` (not userspace's `st_dev`), which is what the
//! tracepoint's `s_dev` holds; a device that encoding cannot hold is
//! refused, never truncated into another device.

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

/// The filter text for one device: `s_dev == N`.
pub fn for_device((major, minor): (u32, u32)) -> Result<String, Refused> {
    Ok(format!("s_dev == {}", encode(major, minor)?))
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
    fn a_device_the_kernel_cannot_encode_is_refused() {
        let refused = encode(4096, 0).unwrap_err();
        assert!(matches!(
            refused,
            Refused::DeviceOutOfRange { major: 4096, .. }
        ));
        assert!(encode(0, 1 << 20).is_err());
    }
}
