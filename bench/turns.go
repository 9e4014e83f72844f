package bench

import (
	"time"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/ort"
)

// Turns times warm sessions on the same inputs in turns, as an A/B
// comparison needs: drift (clock frequency, other processes) then hits
// them alike. In turn t the active sessions go in the order t, t+1, ...
// (mod their number), so that none always goes first (with two: A B,
// then B A), each running perTurn times. After each turn, more is shown
// the turn's index and every run so far (milliseconds, per session) and
// says whether another turn follows; it may clear active[i] to leave
// session i out of the turns after. A nil active means all. Turns
// returns the runs.
func Turns(sessions []*ort.Session, inputs []*graph.Tensor, perTurn int, active []bool, more func(turn int, runs [][]float64) bool) ([][]float64, error) {
	if active == nil {
		active = make([]bool, len(sessions))
		for i := range active {
			active[i] = true
		}
	}
	runs := make([][]float64, len(sessions))
	for turn := 0; ; turn++ {
		for k := range sessions {
			i := (k + turn) % len(sessions)
			if !active[i] {
				continue
			}
			for range perTurn {
				t := time.Now()
				if _, err := sessions[i].Run(inputs); err != nil {
					return runs, err
				}
				runs[i] = append(runs[i], ms(time.Since(t)))
			}
		}
		if !more(turn, runs) {
			return runs, nil
		}
	}
}
