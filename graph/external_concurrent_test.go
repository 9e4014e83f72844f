package graph_test

import (
	"bytes"
	"path/filepath"
	"sync"
	"testing"

	"github.com/optc-dev/optc/graph"
)

// TestConcurrentExternalReads reads the external tensors of one loaded
// model from several goroutines at once, as parallel passes or sessions
// may (make test runs it under -race): the side file is mapped once and
// every read sees the saved bytes.
func TestConcurrentExternalReads(t *testing.T) {
	m := weightsModel(t, 512, 20000, 300, 17000)
	path := filepath.Join(t.TempDir(), "model.onnx")
	if err := graph.Save(m, path, graph.SaveOptions{External: graph.ExternalAlways, SizeThreshold: 1024}); err != nil {
		t.Fatal(err)
	}
	r, err := graph.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, v := range r.Graph.Initializers {
				want, _ := m.Graph.Initializers[i].Const.Bytes()
				if got, err := v.Const.Bytes(); err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: concurrent read differs (%v)", v.Name, err)
				}
			}
		}()
	}
	wg.Wait()
}
