package passes

import "github.com/optc-dev/optc/graph"

// deadCode removes nodes whose outputs nothing reads (and that are not
// graph outputs), then initializers nothing reads. The reachability itself
// is graph.Prune, which calibration also uses to cut a model down to the
// values one run exposes.
var deadCode = &Pass{
	Name:  "eliminate-dead-code",
	Doc:   "remove nodes and initializers whose results nothing uses",
	Level: 1,
	Form:  GraphWide,
	Run:   runDeadCode,
}

func runDeadCode(c *Context) (Stats, error) {
	n, err := graph.Prune(c.Model)
	return Stats{Removed: n}, err
}
