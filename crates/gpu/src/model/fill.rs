//! How weights reach their buffers. A loader that holds the whole file writes each tensor while
//! it builds the model ([`Uploads::now`]); one that receives the file as a stream records where
//! each tensor's bytes go ([`Uploads::later`]), and a [`WeightStream`] writes them as they
//! arrive: most bytes go from the arriving chunk straight to their buffer, and only the tensors
//! the engine must see whole (f32 vectors it rearranges, matrices it re-encodes or joins across
//! an unaligned boundary) are held until their last byte, then dropped. A page on WebGPU thus
//! never holds the file: its memory is a chunk and the largest of those few tensors.

use std::collections::HashMap;
use std::ops::Range;

use runahead_gguf::{Gguf, GgufFile, TensorData, TensorInfo};
use runahead_model::Result;

use super::GpuModel;
use crate::tensor::write_words;
use crate::{GpuContext, GpuError};

/// The bytes of one buffer, made from whole tensors.
pub(super) type Make = Box<dyn FnOnce(&dyn TensorData) -> Result<Vec<u8>>>;

/// Where the weights' bytes go, written now or recorded for a [`WeightStream`].
pub(super) struct Uploads<'a> {
    queue: &'a wgpu::Queue,
    header: &'a Gguf,
    /// The whole file, when the loader has it: every upload happens at once.
    file: Option<&'a GgufFile>,
    copies: Vec<Copy>,
    makes: Vec<Pending>,
}

/// File bytes `from..from + len` to `buffer` at `at` (a multiple of 4); the last partial word
/// is padded with zeros, so nothing else may follow it in the buffer.
struct Copy {
    buffer: wgpu::Buffer,
    at: u64,
    from: u64,
    len: u64,
    /// Bytes received so far; all but `carry`'s are written.
    done: u64,
    /// The start of a word whose other bytes have not arrived.
    carry: ([u8; 4], usize),
}

/// A buffer made from `needs` once they are all held.
struct Pending {
    buffer: wgpu::Buffer,
    needs: Vec<String>,
    make: Make,
}

impl<'a> Uploads<'a> {
    /// Uploads from `file`, each written when it is recorded.
    pub(super) fn now(queue: &'a wgpu::Queue, file: &'a GgufFile) -> Self {
        Uploads {
            queue,
            header: &file.header,
            file: Some(file),
            copies: Vec::new(),
            makes: Vec::new(),
        }
    }

    /// Uploads recorded against `header`, for a [`WeightStream`] to write.
    pub(super) fn later(queue: &'a wgpu::Queue, header: &'a Gguf) -> Self {
        Uploads {
            queue,
            header,
            file: None,
            copies: Vec::new(),
            makes: Vec::new(),
        }
    }

    pub(super) fn header(&self) -> &'a Gguf {
        self.header
    }

    /// Bytes `within` of tensor `info` to `buffer` at `at` (a multiple of 4).
    pub(super) fn copy(
        &mut self,
        buffer: &wgpu::Buffer,
        at: u64,
        info: &TensorInfo,
        within: Range<u64>,
    ) -> Result<()> {
        debug_assert!(at.is_multiple_of(4));
        match self.file {
            Some(file) => {
                let range = within.start as usize..within.end as usize;
                let bytes = file.tensor_bytes(info).get(range).ok_or_else(|| {
                    GpuError::Validation(format!(
                        "tensor '{}': bytes {within:?} of {}",
                        info.name, info.size
                    ))
                })?;
                write_words(self.queue, buffer, at, bytes);
            }
            None => self.copies.push(Copy {
                buffer: buffer.clone(),
                at,
                from: self.header.data_offset + info.offset + within.start,
                len: within.end - within.start,
                done: 0,
                carry: ([0; 4], 0),
            }),
        }
        Ok(())
    }

    /// What was recorded, for [`WeightStream::new`].
    pub(super) fn into_recorded(self) -> Recorded {
        Recorded {
            copies: self.copies,
            makes: self.makes,
        }
    }

    /// `buffer`'s bytes, made by `make` from the tensors `needs` names.
    pub(super) fn make(
        &mut self,
        buffer: &wgpu::Buffer,
        needs: Vec<String>,
        make: Make,
    ) -> Result<()> {
        match self.file {
            Some(file) => write_words(self.queue, buffer, 0, &make(file)?),
            None => self.makes.push(Pending {
                buffer: buffer.clone(),
                needs,
                make,
            }),
        }
        Ok(())
    }
}

/// The uploads [`Uploads::later`] recorded.
pub(super) struct Recorded {
    copies: Vec<Copy>,
    makes: Vec<Pending>,
}

/// Bytes written between two submits of the queued writes (natively a write stays in a staging
/// buffer until the next submit; in a page, until the GPU process has taken it).
const FLUSH_BYTES: u64 = 8 << 20;

/// A tensor held whole for the buffers made from it.
struct Held {
    from: u64,
    len: u64,
    /// Bytes received (they stay counted once `bytes` is released).
    got: u64,
    bytes: Vec<u8>,
    /// The [`Pending`] makes that read it.
    users: Vec<usize>,
    /// Of those, the ones not made yet: at zero the bytes go.
    left: usize,
}

/// A model whose buffers exist and whose weights arrive as the file's bytes, in order
/// ([`GpuModel::stream`]); [`WeightStream::finish`] hands over the model once they are all in.
pub struct WeightStream {
    /// Taken by [`WeightStream::finish`].
    model: Option<GpuModel>,
    ctx: GpuContext,
    /// The model's largest buffers (weights, KV cache), destroyed at once if the stream is
    /// dropped unfinished, rather than whenever the page collects them.
    owned: Vec<wgpu::Buffer>,
    header: Gguf,
    /// By `from`; those before `first_open` are written.
    copies: Vec<Copy>,
    first_open: usize,
    /// By `from`, with their index by name.
    held: Vec<Held>,
    held_index: HashMap<String, usize>,
    first_held: usize,
    makes: Vec<Option<Pending>>,
    /// Per make, its needs not yet whole.
    waiting: Vec<usize>,
    received: u64,
    unflushed: u64,
    /// Bytes of tensors held now, and the most at once.
    held_bytes: u64,
    peak_held: u64,
}

impl WeightStream {
    pub(super) fn new(model: GpuModel, mut header: Gguf, recorded: Recorded) -> Result<Self> {
        // Only the tensor table is read from here on; the metadata (a vocabulary's strings) goes.
        header.metadata = Default::default();
        let Recorded {
            mut copies,
            mut makes,
        } = recorded;
        copies.sort_by_key(|c| c.from);
        // Every tensor a make reads, once, in file order.
        let mut names: Vec<&String> = makes.iter().flat_map(|m| &m.needs).collect();
        names.sort();
        names.dedup();
        let mut held = names
            .into_iter()
            .map(|name| {
                let info = header
                    .tensor(name)
                    .ok_or_else(|| runahead_gguf::GgufError::MissingTensor(name.clone()))?;
                let held = Held {
                    from: header.data_offset + info.offset,
                    len: info.size,
                    got: 0,
                    bytes: Vec::new(),
                    users: Vec::new(),
                    left: 0,
                };
                Ok((name.clone(), held))
            })
            .collect::<Result<Vec<_>>>()?;
        held.sort_by_key(|(_, h)| h.from);
        let held_index: HashMap<String, usize> = held
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), i))
            .collect();
        let mut held: Vec<Held> = held.into_iter().map(|(_, h)| h).collect();
        let mut waiting = Vec::with_capacity(makes.len());
        for (m, pending) in makes.iter_mut().enumerate() {
            pending.needs.sort();
            pending.needs.dedup();
            waiting.push(pending.needs.len());
            for name in &pending.needs {
                if let Some(&i) = held_index.get(name) {
                    held[i].users.push(m);
                    held[i].left += 1;
                }
            }
        }
        let mut owned: Vec<wgpu::Buffer> = copies.iter().map(|c| c.buffer.clone()).collect();
        owned.extend(makes.iter().map(|m| m.buffer.clone()));
        owned.extend(model.kv.k.iter().chain(&model.kv.v).cloned());
        let mut stream = WeightStream {
            ctx: model.ctx.clone(),
            model: Some(model),
            owned,
            header,
            copies,
            first_open: 0,
            held,
            held_index,
            first_held: 0,
            makes: makes.into_iter().map(Some).collect(),
            waiting,
            received: 0,
            unflushed: 0,
            held_bytes: 0,
            peak_held: 0,
        };
        // What needs no byte: makes of no tensor, tensors of no byte.
        for m in 0..stream.makes.len() {
            if stream.waiting[m] == 0 {
                stream.run(m)?;
            }
        }
        for i in 0..stream.held.len() {
            if stream.held[i].len == 0 {
                stream.whole(i)?;
            }
        }
        Ok(stream)
    }

    /// The file's bytes from `offset`, which must be where the last write ended, or anywhere up
    /// to the start of the tensor data (the header's bytes carry no weight). Returns whether the queued
    /// writes were just submitted, after which a caller that can wait should
    /// [`WeightStream::settle`] before sending more.
    pub fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<bool> {
        let skips_header = self.received <= offset && offset <= self.header.data_offset;
        if offset != self.received && !skips_header {
            return Err(GpuError::Validation(format!(
                "model bytes at {offset}, where the next expected are at {}",
                self.received
            ))
            .into());
        }
        let end = offset + bytes.len() as u64;
        let queue = &self.ctx.queue;
        let mut i = self.first_open;
        while i < self.copies.len() && self.copies[i].from < end {
            let c = &mut self.copies[i];
            let start = (c.from + c.done).max(offset);
            let stop = (c.from + c.len).min(end);
            if start < stop {
                let data = &bytes[(start - offset) as usize..(stop - offset) as usize];
                feed(queue, c, data);
            }
            i += 1;
        }
        while self
            .copies
            .get(self.first_open)
            .is_some_and(|c| c.done == c.len)
        {
            self.first_open += 1;
        }
        let mut i = self.first_held;
        while i < self.held.len() && self.held[i].from < end {
            let h = &mut self.held[i];
            let start = (h.from + h.got).max(offset);
            let stop = (h.from + h.len).min(end);
            if start < stop {
                if h.bytes.capacity() == 0 {
                    // A length past this platform's address space fails here too.
                    let len = usize::try_from(h.len).unwrap_or(usize::MAX);
                    h.bytes.try_reserve_exact(len).map_err(|_| {
                        GpuError::OutOfMemory(format!(
                            "no host memory left to hold a tensor of {} bytes while it arrives",
                            h.len
                        ))
                    })?;
                    self.held_bytes += h.len;
                    self.peak_held = self.peak_held.max(self.held_bytes);
                }
                h.bytes
                    .extend_from_slice(&bytes[(start - offset) as usize..(stop - offset) as usize]);
                h.got += stop - start;
                if h.got == h.len {
                    self.whole(i)?;
                }
            }
            i += 1;
        }
        while self
            .held
            .get(self.first_held)
            .is_some_and(|h| h.got == h.len && h.left == 0)
        {
            self.first_held += 1;
        }
        self.received = end;
        self.unflushed += bytes.len() as u64;
        if self.unflushed >= FLUSH_BYTES {
            self.unflushed = 0;
            self.ctx.queue.submit([]);
            self.ctx.check()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Resolves once the GPU has taken every write submitted so far.
    pub async fn settle(&self) -> Result<()> {
        Ok(self.ctx.settle().await?)
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The most bytes of tensors held whole at once so far.
    pub fn peak_held_bytes(&self) -> u64 {
        self.peak_held
    }

    /// The model, once every weight is written; the file's tensor that is not whole yet
    /// otherwise.
    pub fn finish(mut self) -> Result<GpuModel> {
        let missing = |from: u64| {
            let tensor = self.header.tensors.iter().find(|t| {
                let start = self.header.data_offset + t.offset;
                (start..start + t.size).contains(&from)
            });
            GpuError::Validation(format!(
                "the model's bytes ended at {}, before tensor '{}' was whole",
                self.received,
                tensor.map_or("?", |t| t.name.as_str())
            ))
        };
        if let Some(c) = self.copies.iter().find(|c| c.done < c.len) {
            return Err(missing(c.from + c.done).into());
        }
        if let Some(h) = self.held.iter().find(|h| h.got < h.len) {
            return Err(missing(h.from + h.got).into());
        }
        self.ctx.queue.submit([]);
        self.ctx.check()?;
        self.owned.clear();
        self.model.take().ok_or_else(|| {
            GpuError::Validation("the model stream was finished before".into()).into()
        })
    }

    /// Held tensor `i` is whole: the makes it completes run.
    fn whole(&mut self, i: usize) -> Result<()> {
        for m in self.held[i].users.clone() {
            self.waiting[m] -= 1;
            if self.waiting[m] == 0 {
                self.run(m)?;
            }
        }
        Ok(())
    }

    /// Runs make `m` and releases the tensors no other make still reads.
    fn run(&mut self, m: usize) -> Result<()> {
        let Some(pending) = self.makes[m].take() else {
            return Ok(());
        };
        let bytes = {
            let view = HeldView {
                header: &self.header,
                held: &self.held,
                index: &self.held_index,
            };
            (pending.make)(&view)?
        };
        write_words(&self.ctx.queue, &pending.buffer, 0, &bytes);
        for name in &pending.needs {
            if let Some(&i) = self.held_index.get(name) {
                let h = &mut self.held[i];
                h.left -= 1;
                if h.left == 0 {
                    if h.bytes.capacity() > 0 {
                        self.held_bytes = self.held_bytes.saturating_sub(h.len);
                    }
                    h.bytes = Vec::new();
                }
            }
        }
        Ok(())
    }
}

impl Drop for WeightStream {
    fn drop(&mut self) {
        for buffer in &self.owned {
            buffer.destroy();
        }
    }
}

/// Writes `data`, the next bytes of copy `c`, keeping a word's start until its end arrives.
fn feed(queue: &wgpu::Queue, c: &mut Copy, mut data: &[u8]) {
    let len = data.len() as u64;
    let mut at = c.at + c.done - c.carry.1 as u64;
    if c.carry.1 > 0 {
        let take = (4 - c.carry.1).min(data.len());
        c.carry.0[c.carry.1..c.carry.1 + take].copy_from_slice(&data[..take]);
        c.carry.1 += take;
        data = &data[take..];
        if c.carry.1 == 4 {
            queue.write_buffer(&c.buffer, at, &c.carry.0);
            at += 4;
            c.carry = ([0; 4], 0);
        }
    }
    let whole = data.len() / 4 * 4;
    if whole > 0 {
        queue.write_buffer(&c.buffer, at, &data[..whole]);
    }
    let rest = &data[whole..];
    c.carry.0[c.carry.1..c.carry.1 + rest.len()].copy_from_slice(rest);
    c.carry.1 += rest.len();
    c.done += len;
    if c.done == c.len && c.carry.1 > 0 {
        let mut word = [0; 4];
        word[..c.carry.1].copy_from_slice(&c.carry.0[..c.carry.1]);
        queue.write_buffer(&c.buffer, c.at + c.done - c.carry.1 as u64, &word);
        c.carry = ([0; 4], 0);
    }
}

/// The held tensors, as the makes read them.
struct HeldView<'a> {
    header: &'a Gguf,
    held: &'a [Held],
    index: &'a HashMap<String, usize>,
}

impl TensorData for HeldView<'_> {
    fn header(&self) -> &Gguf {
        self.header
    }

    fn bytes_of(&self, info: &TensorInfo) -> &[u8] {
        self.index
            .get(&info.name)
            .map_or(&[], |&i| &self.held[i].bytes)
    }
}
