package data

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/graph"
)

var inputPBName = regexp.MustCompile(`^input_([0-9]+)\.pb$`)

// pbSet is one run's tensors: a single .pb file, or the input_<i>.pb files
// of one data set folder.
type pbSet struct {
	where string
	files []pbFile // sorted by index
}

type pbFile struct {
	index int
	path  string
}

// pbSource yields one batch per data set, loading each when it is reached
// (the first one at Open, so that mismatches show at once).
type pbSource struct {
	inputs []Input
	opts   Options
	sets   []pbSet
	next   int
	first  *Batch
	err    error
}

// openPBFile opens a single TensorProto file for a single-input model.
func openPBFile(path string, inputs []Input, opts Options) (Source, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("%s: a single .pb tensor feeds one input, but the model has %d (%s); use a folder of input_<i>.pb files", path, len(inputs), inputNames(inputs))
	}
	return newPBSource(inputs, opts, []pbSet{{where: path, files: []pbFile{{0, path}}}})
}

// pbSets lists the ONNX test data sets of dir: dir itself when it holds
// input_<i>.pb files, else its sub-folders that do, one run each in natural
// name order (test_data_set_2 before test_data_set_10). None is not an
// error: the folder may hold images instead.
func pbSets(dir string) ([]pbSet, error) {
	files, err := pbSetFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		return []pbSet{{where: dir, files: files}}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, unwrapPathError(err))
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.SortFunc(names, naturalCompare)
	var sets []pbSet
	for _, name := range names {
		sub := filepath.Join(dir, name)
		files, err := pbSetFiles(sub)
		if err != nil {
			return nil, err
		}
		if len(files) > 0 {
			sets = append(sets, pbSet{where: sub, files: files})
		}
	}
	return sets, nil
}

func newPBSource(inputs []Input, opts Options, sets []pbSet) (Source, error) {
	s := &pbSource{inputs: inputs, opts: opts, sets: sets}
	b, err := s.load(sets[0])
	if err != nil {
		return nil, err
	}
	s.first, s.next = b, 1
	return s, nil
}

// pbSetFiles lists the input_<i>.pb files of dir by index.
func pbSetFiles(dir string) ([]pbFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, unwrapPathError(err))
	}
	var files []pbFile
	byIndex := map[int]string{}
	for _, e := range entries {
		m := inputPBName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		i, err := strconv.Atoi(m[1])
		if err != nil || i > 1<<20 {
			return nil, fmt.Errorf("%s: input index in %s is out of range", dir, e.Name())
		}
		if other, dup := byIndex[i]; dup {
			return nil, fmt.Errorf("%s: %s and %s both hold input %d", dir, other, e.Name(), i)
		}
		byIndex[i] = e.Name()
		files = append(files, pbFile{i, filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(files, func(a, b pbFile) int { return cmp.Compare(a.index, b.index) })
	return files, nil
}

// load reads and checks one data set. A tensor whose name is an input's
// feeds that input; the others feed inputs by file index.
func (s *pbSource) load(set pbSet) (*Batch, error) {
	tensors := make([]*graph.Tensor, len(s.inputs))
	from := make([]string, len(s.inputs))
	for _, f := range set.files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, unwrapPathError(err))
		}
		t, err := graph.ParseTensor(b)
		if err != nil {
			if f.index < len(s.inputs) {
				return nil, fmt.Errorf("%s: input %q: %w", f.path, s.inputs[f.index].Name, err)
			}
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		target := slices.IndexFunc(s.inputs, func(in Input) bool { return t.Name != "" && in.Name == t.Name })
		if target < 0 {
			if f.index >= len(s.inputs) {
				return nil, fmt.Errorf("%s: input index %d, but the model has %d input(s) (%s)", f.path, f.index, len(s.inputs), inputNames(s.inputs))
			}
			target = f.index
		}
		in := s.inputs[target]
		if from[target] != "" {
			return nil, fmt.Errorf("%s: both %s and %s feed input %q", set.where, filepath.Base(from[target]), filepath.Base(f.path), in.Name)
		}
		if err := checkData(f.path, in, s.opts, t.DType, t.Dims, false); err != nil {
			return nil, err
		}
		t.Name = in.Name
		tensors[target], from[target] = t, f.path
	}
	var missing []string
	for i, t := range tensors {
		if t == nil {
			missing = append(missing, strconv.Quote(s.inputs[i].Name))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: no tensor for input %s (inputs: %s)", set.where, strings.Join(missing, ", "), inputNames(s.inputs))
	}
	samples := 1
	for _, t := range tensors {
		if len(t.Dims) > 0 {
			samples = int(min(t.Dims[0], 1<<40))
			break
		}
	}
	return &Batch{Tensors: tensors, Samples: samples}, nil
}

// Next returns the next data set.
func (s *pbSource) Next() (*Batch, error) {
	if s.err != nil {
		return nil, s.err
	}
	if b := s.first; b != nil {
		s.first = nil
		return b, nil
	}
	if s.next >= len(s.sets) {
		return nil, io.EOF
	}
	b, err := s.load(s.sets[s.next])
	if err != nil {
		s.err = err
		return nil, err
	}
	s.next++
	return b, nil
}

// Close ends the source; it holds no open files.
func (s *pbSource) Close() error {
	s.first = nil
	if s.err == nil {
		s.err = fmt.Errorf("data source is closed")
	}
	return nil
}

// naturalCompare orders names with runs of digits compared as numbers:
// set_2 before set_10.
func naturalCompare(a, b string) int {
	x, y := a, b
	for x != "" && y != "" {
		if isDigit(x[0]) && isDigit(y[0]) {
			i, j := digitRun(x), digitRun(y)
			nx, ny := strings.TrimLeft(x[:i], "0"), strings.TrimLeft(y[:j], "0")
			if c := cmp.Compare(len(nx), len(ny)); c != 0 {
				return c
			}
			if c := strings.Compare(nx, ny); c != 0 {
				return c
			}
			x, y = x[i:], y[j:]
			continue
		}
		if x[0] != y[0] {
			return cmp.Compare(x[0], y[0])
		}
		x, y = x[1:], y[1:]
	}
	if c := cmp.Compare(len(x), len(y)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}
