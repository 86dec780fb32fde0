//! The gRPC codec of `ferry.v1.WorkDistributor`: prost, with small initial
//! stream buffers.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// Initial size of each stream's encode and decode buffer. tonic's default
/// (8 KiB each) is allocated when a stream opens and held for its whole
/// life; ferry's streams live for an hour and mostly carry heartbeats of a
/// few bytes, so a hub serving thousands of agents would hold 16 KiB per
/// agent for nothing. A larger message grows the buffer as it needs.
pub const STREAM_BUFFER_BYTES: usize = 1024;

/// Bytes encoded before the encoder yields to the runtime (tonic's default).
const YIELD_THRESHOLD_BYTES: usize = 32 * 1024;

/// prost encoding with [`STREAM_BUFFER_BYTES`] initial buffers; used by the
/// generated client and server stubs. Encoding and decoding fail only as
/// prost's codec does (a malformed message is a decode error).
#[derive(Debug, Clone, Copy)]
pub struct SmallBufferCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SmallBufferCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(STREAM_BUFFER_BYTES, YIELD_THRESHOLD_BYTES)
}

impl<T, U> Codec for SmallBufferCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(settings())
    }
}
