package data

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/optc-dev/optc/graph"
)

// member is one array with a sample axis: a .npy file or a member of a
// .npz file, read a batch at a time.
type member struct {
	where  string // the file (and member) for messages
	label  string // where, and the input it feeds
	hdr    *npyHeader
	sample int64 // bytes per sample

	// Stored data is read by offset; deflated data as a stream.
	at     io.ReaderAt
	off    int64 // where the data starts in at
	stream io.Reader
	closer io.Closer
	pos    int // samples read from stream so far
}

// read fills buf with the n samples starting at first.
func (m *member) read(buf []byte, first, n int) error {
	var got int
	var err error
	if m.at != nil {
		got, err = m.at.ReadAt(buf, m.off+int64(first)*m.sample)
		if got == len(buf) {
			err = nil
		}
	} else {
		if first != m.pos {
			return fmt.Errorf("%s: internal error: stream at sample %d, want %d", m.label, m.pos, first)
		}
		got, err = io.ReadFull(m.stream, buf)
		m.pos += n
		if err == nil && m.pos == int(m.hdr.shape[0]) {
			err = m.checkEnd()
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		idx := int64(first)
		if m.sample > 0 {
			idx += int64(got) / m.sample
		}
		return fmt.Errorf("%s: truncated: the data stops in sample %d of %d", m.label, idx, m.hdr.shape[0])
	}
	return fmt.Errorf("%s: reading samples %d to %d: %w", m.label, first, first+n-1, unwrapPathError(err))
}

// checkEnd reads past the last sample of a stream so that the zip reader
// verifies the member's checksum.
func (m *member) checkEnd() error {
	_, err := io.Copy(io.Discard, m.stream)
	return err
}

// sampleSource batches the samples of one member per input.
type sampleSource struct {
	inputs  []Input
	members []*member // one per input, in input order
	batching
	first  int   // without Shuffle: the file position of sample 0 (Skip)
	order  []int // with Shuffle: the sample read at each position
	closer io.Closer
}

// batching is where a source of a known number of samples stands in
// delivering them a batch at a time.
type batching struct {
	batch int
	total int   // samples to deliver
	next  int   // the next sample
	err   error // once set, what every later batch gives
}

// nextBatch makes the next batch, of a tensor per input that tensor makes
// for the batch's n samples, and moves past it. There is none, with
// io.EOF, after the last, nor once the source has failed or been closed.
func (b *batching) nextBatch(inputs int, tensor func(input, n int) (*graph.Tensor, error)) (*Batch, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.next >= b.total {
		return nil, io.EOF
	}
	n := min(b.batch, b.total-b.next)
	out := &Batch{Tensors: make([]*graph.Tensor, inputs), Samples: n}
	for i := range out.Tensors {
		t, err := tensor(i, n)
		if err != nil {
			b.err = err // a source that failed stays failed
			return nil, err
		}
		out.Tensors[i] = t
	}
	b.next += n
	return out, nil
}

// newSampleSource checks the members against the inputs and options and
// returns a source over them. It takes ownership of closer.
func newSampleSource(where string, inputs []Input, members []*member, opts Options, closer io.Closer) (Source, error) {
	s := &sampleSource{inputs: inputs, members: members, closer: closer}
	fail := func(err error) (Source, error) {
		s.Close()
		return nil, err
	}
	for i, m := range members {
		if err := checkData(m.where, inputs[i], opts, m.hdr.dtype, m.hdr.shape, true); err != nil {
			return fail(err)
		}
	}
	n0 := members[0].hdr.shape[0]
	for i, m := range members[1:] {
		if m.hdr.shape[0] != n0 {
			return fail(fmt.Errorf("%s: inputs %q and %q have different sample counts (axis 0): %d and %d",
				where, inputs[0].Name, inputs[i+1].Name, n0, m.hdr.shape[0]))
		}
	}
	if n0 == 0 {
		return fail(fmt.Errorf("%s: the data holds no samples (axis 0 is 0)", where))
	}
	if n0 > 1<<40 {
		return fail(fmt.Errorf("%s: %d samples are too many", where, n0))
	}
	if opts.Shuffle {
		for _, m := range members {
			if m.at == nil {
				return fail(fmt.Errorf("%s: shuffling needs random access: a .npy file or an uncompressed .npz (np.savez), not a compressed member", m.label))
			}
		}
	}
	var err error
	if s.first, s.order, s.total, err = pick(where, int(n0), opts); err != nil {
		return fail(err)
	}
	batch, fixedBy, err := batchSize(where, inputs, opts, false)
	if err != nil {
		return fail(err)
	}
	if s.total, err = fitSampleCount(where, s.total, batch, fixedBy); err != nil {
		return fail(err)
	}
	s.batch = batch
	return s, nil
}

// pick says which of n samples a source reads: after opts.Skip, at most
// opts.Samples, from first on in file order, or in order (drawn from the
// seed) with Shuffle. The same seed draws the same order whatever Skip is,
// so Skip: N reads exactly the samples that Samples: N left out.
func pick(where string, n int, opts Options) (first int, order []int, total int, err error) {
	if opts.Skip >= n {
		return 0, nil, 0, fmt.Errorf("%s: skipping %d samples leaves none of %d", where, opts.Skip, n)
	}
	total = n - opts.Skip
	if opts.Samples > 0 && opts.Samples < total {
		total = opts.Samples
	}
	if opts.Shuffle {
		return 0, drawOrder(opts.Seed, n, opts.Skip+total)[opts.Skip:], total, nil
	}
	return opts.Skip, nil, total, nil
}

// drawOrder draws, from seed, which of n samples are read and in what
// order: the first total of a seeded permutation. Every format with
// Options.Shuffle draws the same way. Past maxPermutation samples (a
// header may claim up to 2^40 empty ones) it draws the same way in
// O(total) time and memory: a partial Fisher-Yates shuffle whose swaps are
// kept in a map.
func drawOrder(seed int64, n, total int) []int {
	r := rand.New(rand.NewPCG(uint64(seed), 0x73687566666c65))
	if n <= maxPermutation {
		return r.Perm(n)[:total]
	}
	swapped := make(map[int]int, total)
	at := func(i int) int {
		if v, ok := swapped[i]; ok {
			return v
		}
		return i
	}
	order := make([]int, total)
	for i := range order {
		j := i + r.IntN(n-i)
		order[i] = at(j)
		swapped[j] = at(i)
	}
	return order
}

// maxPermutation is the most samples drawOrder permutes in full (an int
// each).
const maxPermutation = 1 << 24

// Next returns the next batch of samples.
func (s *sampleSource) Next() (*Batch, error) {
	return s.nextBatch(len(s.members), s.memberTensor)
}

// memberTensor reads the next n samples of input i's member.
func (s *sampleSource) memberTensor(i, n int) (*graph.Tensor, error) {
	m := s.members[i]
	buf := make([]byte, int64(n)*m.sample)
	if err := s.readSamples(m, buf, n); err != nil {
		return nil, err
	}
	dims := append([]int64{int64(n)}, m.hdr.shape[1:]...)
	t, err := graph.NewTensor(s.inputs[i].Name, m.hdr.dtype, dims, buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.label, err)
	}
	return t, nil
}

// readSamples fills buf with the n samples from position s.next on: a
// contiguous run, or with Shuffle one sample at a time in the drawn order.
func (s *sampleSource) readSamples(m *member, buf []byte, n int) error {
	if s.order == nil {
		return m.read(buf, s.first+s.next, n)
	}
	for k := range n {
		if err := m.read(buf[int64(k)*m.sample:int64(k+1)*m.sample], s.order[s.next+k], 1); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the files.
func (s *sampleSource) Close() error {
	var err error
	for _, m := range s.members {
		if m != nil && m.closer != nil {
			if cerr := m.closer.Close(); err == nil {
				err = cerr
			}
			m.closer = nil
		}
	}
	if s.closer != nil {
		if cerr := s.closer.Close(); err == nil {
			err = cerr
		}
		s.closer = nil
	}
	if s.err == nil {
		s.err = errors.New("data source is closed")
	}
	return err
}

// openNpy opens a .npy file for a single-input model.
func openNpy(path string, inputs []Input, opts Options) (Source, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("%s: a .npy file feeds one input, but the model has %d (%s); use a .npz file with one member per input", path, len(inputs), inputNames(inputs))
	}
	f, size, err := openSized(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := openMember(path, inputs[0].Name, f, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	return newSampleSource(path, inputs, []*member{m}, opts, f)
}

// openMember reads the header of the .npy bytes at the start of at (size
// bytes long), which feed input, and checks that the data is all there.
func openMember(where, input string, at io.ReaderAt, size int64) (*member, error) {
	label := memberLabel(where, input)
	h, err := readNpyHeader(bufio.NewReader(io.NewSectionReader(at, 0, size)), size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	if err := checkSampleHeader(label, h, size); err != nil {
		return nil, err
	}
	return &member{where: where, label: label, hdr: h, sample: h.sampleBytes(), at: at, off: h.dataOff}, nil
}

func memberLabel(where, input string) string {
	return fmt.Sprintf("%s: input %q", where, input)
}

// checkSampleHeader checks that the data a header calls for fits in size
// bytes (the file, or the member's uncompressed size), and reports the
// first incomplete sample when it does not.
func checkSampleHeader(where string, h *npyHeader, size int64) error {
	if avail := size - h.dataOff; h.size > avail {
		return truncatedError(where, h, avail)
	}
	return nil
}
