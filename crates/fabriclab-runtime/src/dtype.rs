//! Element types and the reduction (sum) of a received range into the
//! local buffer.

use half::{bf16, f16};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F64,
    I32,
    I64,
    F16,
    BF16,
}

impl DType {
    pub fn parse(s: &str) -> Result<DType, String> {
        Ok(match s {
            "float32" | "f32" => DType::F32,
            "float64" | "f64" => DType::F64,
            "int32" | "i32" => DType::I32,
            "int64" | "i64" => DType::I64,
            "float16" | "f16" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            _ => {
                return Err(format!(
                "dtype: {s:?} is not supported (float32, float64, int32, int64, float16, bfloat16)"
            ))
            }
        })
    }
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::F16 | DType::BF16 => 2,
        }
    }
}

trait Elem: Copy {
    const N: usize;
    fn from_le(b: &[u8]) -> Self;
    fn to_le(self, b: &mut [u8]);
    fn add(self, o: Self) -> Self;
}

macro_rules! elem {
    ($t:ty, $n:expr, $add:expr) => {
        impl Elem for $t {
            const N: usize = $n;
            fn from_le(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().unwrap())
            }
            fn to_le(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes())
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                let f: fn($t, $t) -> $t = $add;
                f(self, o)
            }
        }
    };
}
elem!(f32, 4, |a, b| a + b);
elem!(f64, 8, |a, b| a + b);
elem!(i32, 4, |a, b| a.wrapping_add(b));
elem!(i64, 8, |a, b| a.wrapping_add(b));
elem!(f16, 2, |a, b| f16::from_f32(a.to_f32() + b.to_f32()));
elem!(bf16, 2, |a, b| bf16::from_f32(a.to_f32() + b.to_f32()));

fn sum_into<T: Elem>(dst: &mut [u8], src: &[u8]) {
    // SAFETY: align_to only reinterprets plain-old-data bytes as numbers.
    let (dp, dm, ds) = unsafe { dst.align_to_mut::<T>() };
    let (sp, sm, ss) = unsafe { src.align_to::<T>() };
    if dp.is_empty()
        && sp.is_empty()
        && ds.is_empty()
        && ss.is_empty()
        && cfg!(target_endian = "little")
    {
        // Aligned: a plain loop the compiler vectorizes.
        for (a, b) in dm.iter_mut().zip(sm) {
            *a = a.add(*b);
        }
        return;
    }
    for (a, b) in dst.chunks_exact_mut(T::N).zip(src.chunks_exact(T::N)) {
        T::from_le(a).add(T::from_le(b)).to_le(a);
    }
}

/// `dst += src` elementwise; both hold whole elements of `dt` (the caller checks).
pub fn reduce_sum(dt: DType, dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    match dt {
        DType::F32 => sum_into::<f32>(dst, src),
        DType::F64 => sum_into::<f64>(dst, src),
        DType::I32 => sum_into::<i32>(dst, src),
        DType::I64 => sum_into::<i64>(dst, src),
        DType::F16 => sum_into::<f16>(dst, src),
        DType::BF16 => sum_into::<bf16>(dst, src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Elem>(v: &[T]) -> Vec<u8> {
        let mut out = vec![0u8; v.len() * T::N];
        for (x, c) in v.iter().zip(out.chunks_exact_mut(T::N)) {
            x.to_le(c);
        }
        out
    }

    #[test]
    fn sums_by_type() {
        let mut d = bytes(&[1.5f32, -2.0, 3.25]);
        reduce_sum(DType::F32, &mut d, &bytes(&[0.5f32, 2.0, 0.75]));
        assert_eq!(d, bytes(&[2.0f32, 0.0, 4.0]));
        let mut d = bytes(&[i32::MAX, 5]);
        reduce_sum(DType::I32, &mut d, &bytes(&[1i32, -7]));
        assert_eq!(d, bytes(&[i32::MIN, -2]));
        let mut d = bytes(&[f16::from_f32(1.0), f16::from_f32(0.5)]);
        reduce_sum(
            DType::F16,
            &mut d,
            &bytes(&[f16::from_f32(2.0), f16::from_f32(0.25)]),
        );
        assert_eq!(d, bytes(&[f16::from_f32(3.0), f16::from_f32(0.75)]));
        let mut d = bytes(&[bf16::from_f32(4.0)]);
        reduce_sum(DType::BF16, &mut d, &bytes(&[bf16::from_f32(-1.0)]));
        assert_eq!(d, bytes(&[bf16::from_f32(3.0)]));
    }

    #[test]
    fn unaligned_ranges_sum_too() {
        let mut big = [0u8; 13];
        big[1..9].copy_from_slice(&bytes(&[1.0f32, 2.0]));
        let src = bytes(&[10.0f32, 20.0]);
        reduce_sum(DType::F32, &mut big[1..9], &src);
        assert_eq!(&big[1..9], &bytes(&[11.0f32, 22.0])[..]);
    }
}
