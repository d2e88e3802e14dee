//! Element types and tensors.
//!
//! `DataType` names every ONNX element type. `Tensor` pairs a `DataType` with
//! an `ndarray` array in standard (row-major) layout. Types that Rust has no
//! native scalar for (the float8 kinds, float4/float6, int4/uint4, int2/uint2)
//! are stored unpacked, one element per byte, holding the element's bit
//! pattern in the low bits: kernels that only move elements (Pad,
//! CenterCropPad) handle them like any other byte, and packing is a concern of
//! the wire format only.

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;
use std::fmt;

/// Every ONNX element type, numbered as in `TensorProto.DataType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataType {
    Float,
    Uint8,
    Int8,
    Uint16,
    Int16,
    Int32,
    Int64,
    String,
    Bool,
    Float16,
    Double,
    Uint32,
    Uint64,
    Complex64,
    Complex128,
    Bfloat16,
    Float8E4M3FN,
    Float8E4M3FNUZ,
    Float8E5M2,
    Float8E5M2FNUZ,
    Uint4,
    Int4,
    Float4E2M1,
    Float8E8M0,
    Uint2,
    Int2,
    Float6E2M3,
    Float6E3M2,
}

impl DataType {
    pub const ALL: [DataType; 28] = [
        DataType::Float,
        DataType::Uint8,
        DataType::Int8,
        DataType::Uint16,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::String,
        DataType::Bool,
        DataType::Float16,
        DataType::Double,
        DataType::Uint32,
        DataType::Uint64,
        DataType::Complex64,
        DataType::Complex128,
        DataType::Bfloat16,
        DataType::Float8E4M3FN,
        DataType::Float8E4M3FNUZ,
        DataType::Float8E5M2,
        DataType::Float8E5M2FNUZ,
        DataType::Uint4,
        DataType::Int4,
        DataType::Float4E2M1,
        DataType::Float8E8M0,
        DataType::Uint2,
        DataType::Int2,
        DataType::Float6E2M3,
        DataType::Float6E3M2,
    ];

    /// The `TensorProto.DataType` number.
    pub fn code(self) -> i32 {
        // ALL is ordered by code, starting at 1.
        DataType::ALL.iter().position(|d| *d == self).unwrap_or(0) as i32 + 1
    }

    pub fn from_code(code: i32) -> Option<DataType> {
        if code < 1 {
            return None;
        }
        DataType::ALL.get(code as usize - 1).copied()
    }

    /// The name ONNX uses in type strings, e.g. `float16` in `tensor(float16)`.
    pub fn onnx_name(self) -> &'static str {
        match self {
            DataType::Float => "float",
            DataType::Uint8 => "uint8",
            DataType::Int8 => "int8",
            DataType::Uint16 => "uint16",
            DataType::Int16 => "int16",
            DataType::Int32 => "int32",
            DataType::Int64 => "int64",
            DataType::String => "string",
            DataType::Bool => "bool",
            DataType::Float16 => "float16",
            DataType::Double => "double",
            DataType::Uint32 => "uint32",
            DataType::Uint64 => "uint64",
            DataType::Complex64 => "complex64",
            DataType::Complex128 => "complex128",
            DataType::Bfloat16 => "bfloat16",
            DataType::Float8E4M3FN => "float8e4m3fn",
            DataType::Float8E4M3FNUZ => "float8e4m3fnuz",
            DataType::Float8E5M2 => "float8e5m2",
            DataType::Float8E5M2FNUZ => "float8e5m2fnuz",
            DataType::Uint4 => "uint4",
            DataType::Int4 => "int4",
            DataType::Float4E2M1 => "float4e2m1",
            DataType::Float8E8M0 => "float8e8m0",
            DataType::Uint2 => "uint2",
            DataType::Int2 => "int2",
            DataType::Float6E2M3 => "float6e2m3",
            DataType::Float6E3M2 => "float6e3m2",
        }
    }

    pub fn from_onnx_name(name: &str) -> Option<DataType> {
        DataType::ALL
            .iter()
            .copied()
            .find(|d| d.onnx_name() == name)
    }

    /// Bits per element on the wire (raw_data), 0 for strings.
    pub fn bit_width(self) -> usize {
        match self {
            DataType::String => 0,
            DataType::Bool | DataType::Uint8 | DataType::Int8 => 8,
            DataType::Uint16 | DataType::Int16 | DataType::Float16 | DataType::Bfloat16 => 16,
            DataType::Float | DataType::Int32 | DataType::Uint32 => 32,
            DataType::Double | DataType::Int64 | DataType::Uint64 | DataType::Complex64 => 64,
            DataType::Complex128 => 128,
            DataType::Float8E4M3FN
            | DataType::Float8E4M3FNUZ
            | DataType::Float8E5M2
            | DataType::Float8E5M2FNUZ
            | DataType::Float8E8M0 => 8,
            DataType::Uint4 | DataType::Int4 | DataType::Float4E2M1 => 4,
            DataType::Uint2 | DataType::Int2 => 2,
            DataType::Float6E2M3 | DataType::Float6E3M2 => 6,
        }
    }

    /// Bytes one element takes in memory here (sub-byte types are stored
    /// one per byte); for strings, the handle only, not the text.
    pub fn memory_bytes(self) -> usize {
        match self {
            DataType::String => std::mem::size_of::<String>(),
            d if d.is_bits() => 1,
            d => d.bit_width() / 8,
        }
    }

    /// True for types stored as bit patterns in `Storage::Bits`.
    pub fn is_bits(self) -> bool {
        matches!(
            self,
            DataType::Float8E4M3FN
                | DataType::Float8E4M3FNUZ
                | DataType::Float8E5M2
                | DataType::Float8E5M2FNUZ
                | DataType::Float8E8M0
                | DataType::Uint4
                | DataType::Int4
                | DataType::Float4E2M1
                | DataType::Uint2
                | DataType::Int2
                | DataType::Float6E2M3
                | DataType::Float6E3M2
        )
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
        )
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.onnx_name())
    }
}

/// The array behind a tensor, one variant per Rust element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Storage {
    F32(ArrayD<f32>),
    F64(ArrayD<f64>),
    F16(ArrayD<f16>),
    BF16(ArrayD<bf16>),
    I8(ArrayD<i8>),
    I16(ArrayD<i16>),
    I32(ArrayD<i32>),
    I64(ArrayD<i64>),
    U8(ArrayD<u8>),
    U16(ArrayD<u16>),
    U32(ArrayD<u32>),
    U64(ArrayD<u64>),
    Bool(ArrayD<bool>),
    Str(ArrayD<String>),
    C64(ArrayD<Complex<f32>>),
    C128(ArrayD<Complex<f64>>),
    /// Sub-byte and float8 types: one element per byte, bit pattern in the low bits.
    Bits(ArrayD<u8>),
}

/// Applies the same generic expression to whichever array a `Storage` holds.
#[macro_export]
macro_rules! with_storage {
    ($storage:expr, $arr:ident => $body:expr) => {
        match $storage {
            $crate::tensor::Storage::F32($arr) => $body,
            $crate::tensor::Storage::F64($arr) => $body,
            $crate::tensor::Storage::F16($arr) => $body,
            $crate::tensor::Storage::BF16($arr) => $body,
            $crate::tensor::Storage::I8($arr) => $body,
            $crate::tensor::Storage::I16($arr) => $body,
            $crate::tensor::Storage::I32($arr) => $body,
            $crate::tensor::Storage::I64($arr) => $body,
            $crate::tensor::Storage::U8($arr) => $body,
            $crate::tensor::Storage::U16($arr) => $body,
            $crate::tensor::Storage::U32($arr) => $body,
            $crate::tensor::Storage::U64($arr) => $body,
            $crate::tensor::Storage::Bool($arr) => $body,
            $crate::tensor::Storage::Str($arr) => $body,
            $crate::tensor::Storage::C64($arr) => $body,
            $crate::tensor::Storage::C128($arr) => $body,
            $crate::tensor::Storage::Bits($arr) => $body,
        }
    };
}

/// Like `with_storage!`, but rebuilds a `Storage` of the same variant from the
/// expression's array result.
#[macro_export]
macro_rules! map_storage {
    ($storage:expr, $arr:ident => $body:expr) => {
        match $storage {
            $crate::tensor::Storage::F32($arr) => $crate::tensor::Storage::F32($body),
            $crate::tensor::Storage::F64($arr) => $crate::tensor::Storage::F64($body),
            $crate::tensor::Storage::F16($arr) => $crate::tensor::Storage::F16($body),
            $crate::tensor::Storage::BF16($arr) => $crate::tensor::Storage::BF16($body),
            $crate::tensor::Storage::I8($arr) => $crate::tensor::Storage::I8($body),
            $crate::tensor::Storage::I16($arr) => $crate::tensor::Storage::I16($body),
            $crate::tensor::Storage::I32($arr) => $crate::tensor::Storage::I32($body),
            $crate::tensor::Storage::I64($arr) => $crate::tensor::Storage::I64($body),
            $crate::tensor::Storage::U8($arr) => $crate::tensor::Storage::U8($body),
            $crate::tensor::Storage::U16($arr) => $crate::tensor::Storage::U16($body),
            $crate::tensor::Storage::U32($arr) => $crate::tensor::Storage::U32($body),
            $crate::tensor::Storage::U64($arr) => $crate::tensor::Storage::U64($body),
            $crate::tensor::Storage::Bool($arr) => $crate::tensor::Storage::Bool($body),
            $crate::tensor::Storage::Str($arr) => $crate::tensor::Storage::Str($body),
            $crate::tensor::Storage::C64($arr) => $crate::tensor::Storage::C64($body),
            $crate::tensor::Storage::C128($arr) => $crate::tensor::Storage::C128($body),
            $crate::tensor::Storage::Bits($arr) => $crate::tensor::Storage::Bits($body),
        }
    };
}

/// A typed n-dimensional array in standard layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    dtype: DataType,
    storage: Storage,
}

impl Tensor {
    /// Pairs a dtype with storage; fails when the storage variant cannot hold
    /// the dtype. The array is made contiguous (standard layout).
    pub fn new(dtype: DataType, storage: Storage) -> Result<Tensor, String> {
        if storage_variant(dtype) != storage.variant_name() {
            return Err(format!(
                "storage {} cannot hold element type {dtype}",
                storage.variant_name()
            ));
        }
        let storage = map_storage!(storage, a => if a.is_standard_layout() { a } else { a.as_standard_layout().into_owned() });
        Ok(Tensor { dtype, storage })
    }

    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    pub fn into_storage(self) -> Storage {
        self.storage
    }

    pub fn shape(&self) -> &[usize] {
        with_storage!(&self.storage, a => a.shape())
    }

    pub fn len(&self) -> usize {
        with_storage!(&self.storage, a => a.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// The values of an integer tensor widened to i64 (for index-like inputs).
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        match &self.storage {
            Storage::I64(a) => Some(a.iter().copied().collect()),
            Storage::I32(a) => Some(a.iter().map(|&v| v as i64).collect()),
            Storage::I16(a) => Some(a.iter().map(|&v| v as i64).collect()),
            Storage::I8(a) => Some(a.iter().map(|&v| v as i64).collect()),
            Storage::U8(a) => Some(a.iter().map(|&v| v as i64).collect()),
            Storage::U16(a) => Some(a.iter().map(|&v| v as i64).collect()),
            Storage::U32(a) => Some(a.iter().map(|&v| v as i64).collect()),
            Storage::U64(a) => a.iter().map(|&v| i64::try_from(v).ok()).collect(),
            _ => None,
        }
    }
}

impl Storage {
    pub fn variant_name(&self) -> &'static str {
        match self {
            Storage::F32(_) => "F32",
            Storage::F64(_) => "F64",
            Storage::F16(_) => "F16",
            Storage::BF16(_) => "BF16",
            Storage::I8(_) => "I8",
            Storage::I16(_) => "I16",
            Storage::I32(_) => "I32",
            Storage::I64(_) => "I64",
            Storage::U8(_) => "U8",
            Storage::U16(_) => "U16",
            Storage::U32(_) => "U32",
            Storage::U64(_) => "U64",
            Storage::Bool(_) => "Bool",
            Storage::Str(_) => "Str",
            Storage::C64(_) => "C64",
            Storage::C128(_) => "C128",
            Storage::Bits(_) => "Bits",
        }
    }
}

fn storage_variant(dtype: DataType) -> &'static str {
    match dtype {
        DataType::Float => "F32",
        DataType::Double => "F64",
        DataType::Float16 => "F16",
        DataType::Bfloat16 => "BF16",
        DataType::Int8 => "I8",
        DataType::Int16 => "I16",
        DataType::Int32 => "I32",
        DataType::Int64 => "I64",
        DataType::Uint8 => "U8",
        DataType::Uint16 => "U16",
        DataType::Uint32 => "U32",
        DataType::Uint64 => "U64",
        DataType::Bool => "Bool",
        DataType::String => "Str",
        DataType::Complex64 => "C64",
        DataType::Complex128 => "C128",
        _ => "Bits",
    }
}

/// Conversions from native arrays, for tests and kernels.
pub trait Element: Clone + Default + 'static {
    const DTYPE: DataType;
    fn wrap(a: ArrayD<Self>) -> Storage;
    fn view(s: &Storage) -> Option<&ArrayD<Self>>;
}

macro_rules! element {
    ($t:ty, $dt:ident, $var:ident) => {
        impl Element for $t {
            const DTYPE: DataType = DataType::$dt;
            fn wrap(a: ArrayD<Self>) -> Storage {
                Storage::$var(a)
            }
            fn view(s: &Storage) -> Option<&ArrayD<Self>> {
                match s {
                    Storage::$var(a) => Some(a),
                    _ => None,
                }
            }
        }
    };
}
element!(f32, Float, F32);
element!(f64, Double, F64);
element!(f16, Float16, F16);
element!(bf16, Bfloat16, BF16);
element!(i8, Int8, I8);
element!(i16, Int16, I16);
element!(i32, Int32, I32);
element!(i64, Int64, I64);
element!(u8, Uint8, U8);
element!(u16, Uint16, U16);
element!(u32, Uint32, U32);
element!(u64, Uint64, U64);
element!(bool, Bool, Bool);
element!(String, String, Str);
element!(Complex<f32>, Complex64, C64);
element!(Complex<f64>, Complex128, C128);

impl Tensor {
    /// A tensor of a native element type.
    pub fn from_array<T: Element>(a: ArrayD<T>) -> Tensor {
        let a = if a.is_standard_layout() {
            a
        } else {
            a.as_standard_layout().into_owned()
        };
        Tensor {
            dtype: T::DTYPE,
            storage: T::wrap(a),
        }
    }

    /// A tensor from a shape and row-major values; panics only on a
    /// programming error (length mismatch), so it is meant for tests.
    pub fn from_vec<T: Element>(shape: &[usize], values: Vec<T>) -> Tensor {
        let a = ArrayD::from_shape_vec(IxDyn(shape), values).expect("shape matches values");
        Tensor::from_array(a)
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor::from_vec(&[], vec![v])
    }

    pub fn array<T: Element>(&self) -> Option<&ArrayD<T>> {
        T::view(&self.storage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_match_onnx_numbering() {
        for d in DataType::ALL {
            assert_eq!(DataType::from_code(d.code()), Some(d));
            assert_eq!(DataType::from_onnx_name(d.onnx_name()), Some(d));
        }
        assert_eq!(DataType::Float.code(), 1);
        assert_eq!(DataType::Bfloat16.code(), 16);
        assert_eq!(DataType::Int4.code(), 22);
        assert_eq!(DataType::Float4E2M1.code(), 23);
        assert_eq!(DataType::Int2.code(), 26);
        assert_eq!(DataType::from_code(0), None);
        assert_eq!(DataType::from_code(99), None);
    }

    #[test]
    fn storage_must_fit_dtype() {
        let s = Storage::F32(ArrayD::zeros(IxDyn(&[2])));
        assert!(Tensor::new(DataType::Double, s.clone()).is_err());
        assert!(Tensor::new(DataType::Float, s).is_ok());
        let b = Storage::Bits(ArrayD::zeros(IxDyn(&[2])));
        assert!(Tensor::new(DataType::Int4, b).is_ok());
    }
}
