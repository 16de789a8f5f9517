//! The weight formats the engine multiplies by, grouped by how their products are computed:
//! float rows against f32 activations, 32-element blocks against 8-bit activation blocks of 32,
//! and 256-element K-quant super-blocks against 8-bit activation blocks of 256.

use runahead_gguf::GgmlType;

/// Float element types: products in f32 against f32 activations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatFormat {
    F32,
    F16,
    BF16,
}

/// 32-element block formats: products against [`crate::q8::Q8Rows`].
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q32Format {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
}

/// 256-element K-quant formats: products against [`crate::q8::BlockQ8K`].
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KFormat {
    Q4_K,
    Q5_K,
    Q6_K,
}

/// A weight matrix's element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    Float(FloatFormat),
    Q32(Q32Format),
    K(KFormat),
}

impl WeightFormat {
    /// The format of a GGML type, or `None` for a type the engine cannot multiply by.
    pub fn of(ty: GgmlType) -> Option<Self> {
        use WeightFormat::*;
        Some(match ty {
            GgmlType::F32 => Float(FloatFormat::F32),
            GgmlType::F16 => Float(FloatFormat::F16),
            GgmlType::BF16 => Float(FloatFormat::BF16),
            GgmlType::Q4_0 => Q32(Q32Format::Q4_0),
            GgmlType::Q4_1 => Q32(Q32Format::Q4_1),
            GgmlType::Q5_0 => Q32(Q32Format::Q5_0),
            GgmlType::Q5_1 => Q32(Q32Format::Q5_1),
            GgmlType::Q8_0 => Q32(Q32Format::Q8_0),
            GgmlType::Q4_K => K(KFormat::Q4_K),
            GgmlType::Q5_K => K(KFormat::Q5_K),
            GgmlType::Q6_K => K(KFormat::Q6_K),
            _ => return None,
        })
    }

    pub fn ggml_type(self) -> GgmlType {
        use WeightFormat::*;
        match self {
            Float(FloatFormat::F32) => GgmlType::F32,
            Float(FloatFormat::F16) => GgmlType::F16,
            Float(FloatFormat::BF16) => GgmlType::BF16,
            Q32(Q32Format::Q4_0) => GgmlType::Q4_0,
            Q32(Q32Format::Q4_1) => GgmlType::Q4_1,
            Q32(Q32Format::Q5_0) => GgmlType::Q5_0,
            Q32(Q32Format::Q5_1) => GgmlType::Q5_1,
            Q32(Q32Format::Q8_0) => GgmlType::Q8_0,
            K(KFormat::Q4_K) => GgmlType::Q4_K,
            K(KFormat::Q5_K) => GgmlType::Q5_K,
            K(KFormat::Q6_K) => GgmlType::Q6_K,
        }
    }

    /// Every format, for tests.
    pub fn all() -> impl Iterator<Item = WeightFormat> {
        GgmlType::all().filter_map(WeightFormat::of)
    }

    /// Elements per block.
    pub fn block_size(self) -> usize {
        self.ggml_type().block_size() as usize
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        self.ggml_type().block_bytes() as usize
    }
}

impl Q32Format {
    /// Every 32-element block format.
    pub const ALL: [Q32Format; 5] = [
        Q32Format::Q4_0,
        Q32Format::Q4_1,
        Q32Format::Q5_0,
        Q32Format::Q5_1,
        Q32Format::Q8_0,
    ];

    pub fn block_bytes(self) -> usize {
        WeightFormat::Q32(self).block_bytes()
    }

    /// Whether a block carries an offset `m` (x = q * d + m), which adds `m * sum(x)` to a
    /// product.
    pub const fn has_min(self) -> bool {
        matches!(self, Q32Format::Q4_1 | Q32Format::Q5_1)
    }
}

impl KFormat {
    pub fn block_bytes(self) -> usize {
        WeightFormat::K(self).block_bytes()
    }
}

impl FloatFormat {
    pub fn element_bytes(self) -> usize {
        match self {
            FloatFormat::F32 => 4,
            FloatFormat::F16 | FloatFormat::BF16 => 2,
        }
    }
}
