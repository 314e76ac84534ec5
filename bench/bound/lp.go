package bound

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
	corev1 "k8s.io/api/core/v1"
)

// solve builds one part's LP in the standard form gonum's simplex takes
// (minimize cᵀz subject to Az = b, z >= 0; every inequality gets a slack)
// and returns its optimum, its rows and the node kinds it uses.
//
// Variables: x[g,o] pods of group g on kind o, y[o] nodes of kind o
// (fractional), k[o] the credits of a burstable kind. Rows:
//
//	cover   sum_o x[g,o] = count[g]
//	room    room[o,r]*y[o] - sum_g req[g,r]*x[g,o] >= 0     every resource r
//	credit  k[o] - rate[o]*(sum_g cpu[g]*x[g,o] - base[o]*y[o]) >= 0
//	anti    y[o] - sum_{g in S} x[g,o] >= 0                 every anti set S
//
// and the cost is sum_o price[o]*y[o] + k[o].
func solve(part []*group, cols []*column, resNames []corev1.ResourceName) (float64, int, int, error) {
	// The kinds this part uses, renumbered.
	local := map[int]int{}
	var used []int
	for _, g := range part {
		for _, o := range g.allowed {
			if _, ok := local[o]; !ok {
				local[o] = len(used)
				used = append(used, o)
			}
		}
	}
	type entry struct {
		row, col int
		v        float64
	}
	var entries []entry
	var cost, b []float64
	nvar := 0
	newVar := func(c float64) int { cost = append(cost, c); nvar++; return nvar - 1 }
	nrow := 0
	newRow := func(rhs float64) int { b = append(b, rhs); nrow++; return nrow - 1 }
	set := func(r, c int, v float64) { entries = append(entries, entry{r, c, v}) }
	// Every inequality is loosened by a few 1e-7 of a node (a different
	// amount per row): the LP is then a relaxation of the one above, its
	// optimum lower by at most that much room's price, and its first
	// basis is not degenerate (gonum's simplex stalls on ties otherwise).
	relaxedRow := func() int { return newRow(-1e-7 * (1 + math.Mod(float64(nrow)*0.618034, 1))) }
	// basis has, per row, the variable of the first feasible basis: the
	// row's slack, or the cover row's artificial variable (see below).
	var basis []int
	slack := func(r int) {
		v := newVar(0)
		set(r, v, -1)
		basis = append(basis, v)
	}

	y := make([]int, len(used))
	for i, o := range used {
		y[i] = newVar(cols[o].price)
	}
	// The simplex starts from pods bought at a price of big each
	// (artificial variables a[g] in the cover rows, x = y = 0): big is
	// more than one pod costs on a node of its own, so the optimum buys
	// none of them, and even if it did, more variables only lower the
	// minimum: the LP stays a relaxation.
	big := 1.0
	for _, o := range used {
		c := cols[o]
		big = max(big, 2*(c.price+c.rate*c.room[cpuRow(resNames)]))
	}
	x := make([]map[int]int, len(part)) // group -> local kind -> variable
	for gi, g := range part {
		x[gi] = map[int]int{}
		r := newRow(g.count)
		for _, o := range g.allowed {
			v := newVar(0)
			x[gi][local[o]] = v
			set(r, v, 1)
		}
		a := newVar(big)
		set(r, a, 1)
		basis = append(basis, a)
	}
	cpu := cpuRow(resNames)
	for li, o := range used {
		c := cols[o]
		// A row is left out when another implies it: every group the
		// kind takes fills at most as large a share of this row's room
		// as of the other's.
		implies := func(rj, ri int) bool {
			if c.room[rj] <= 0 || c.room[ri] <= 0 {
				return false
			}
			for gi, g := range part {
				if _, ok := x[gi][li]; ok && g.req[ri]/c.room[ri] > g.req[rj]/c.room[rj] {
					return false
				}
			}
			return true
		}
		for ri := range resNames {
			implied := false
			for rj := range resNames {
				if rj != ri && implies(rj, ri) && (rj < ri || !implies(ri, rj)) {
					implied = true
					break
				}
			}
			if implied {
				continue
			}
			r := -1
			for gi, g := range part {
				v, ok := x[gi][li]
				if !ok || g.req[ri] == 0 {
					continue
				}
				if r < 0 {
					r = relaxedRow()
				}
				// Rows are divided by the room, so that bytes and
				// millicores do not make the basis ill-conditioned.
				set(r, v, -g.req[ri]/c.room[ri])
			}
			if r < 0 {
				continue
			}
			set(r, y[li], 1)
			slack(r)
		}
		if c.rate > 0 && cpu > 0 {
			// Divided by rate*room[cpu], as the room rows are.
			r := relaxedRow()
			scale := c.rate * c.room[cpu]
			set(r, newVar(1), 1/scale)
			set(r, y[li], c.baseMinusDaemon/c.room[cpu])
			for gi, g := range part {
				if v, ok := x[gi][li]; ok && g.req[cpu] > 0 {
					set(r, v, -g.req[cpu]/c.room[cpu])
				}
			}
			slack(r)
		}
	}
	// One row per anti-affinity set: its pods are on distinct nodes, so
	// the nodes of the kinds any of them may use are at least as many as
	// its pods. Its first basis is an artificial variable too (nodes at
	// big each).
	type antiSet struct {
		pods  float64
		kinds map[int]bool
	}
	sets := map[int]*antiSet{}
	var setIDs []int
	for _, g := range part {
		if g.anti < 0 {
			continue
		}
		s, ok := sets[g.anti]
		if !ok {
			s = &antiSet{kinds: map[int]bool{}}
			sets[g.anti] = s
			setIDs = append(setIDs, g.anti)
		}
		s.pods += g.count
		for _, o := range g.allowed {
			s.kinds[local[o]] = true
		}
	}
	for _, id := range setIDs {
		s := sets[id]
		r := newRow(s.pods)
		for li := range used {
			if s.kinds[li] {
				set(r, y[li], 1)
			}
		}
		set(r, newVar(0), -1)
		a := newVar(big)
		set(r, a, 1)
		basis = append(basis, a)
	}
	A := mat.NewDense(nrow, nvar, nil)
	for _, e := range entries {
		A.Set(e.row, e.col, A.At(e.row, e.col)+e.v)
	}
	opt, _, err := lp.Simplex(cost, A, b, 1e-10, basis)
	if err != nil {
		return 0, nrow, len(used), fmt.Errorf("solving the LP of %d groups on %d node kinds (%d rows, %d variables): %w", len(part), len(used), nrow, nvar, err)
	}
	return opt, nrow, len(used), nil
}

// cpuRow is the row of cpu among the resources, or 0 (pods) when no pod
// requests cpu.
func cpuRow(resNames []corev1.ResourceName) int {
	for i, n := range resNames {
		if n == corev1.ResourceCPU {
			return i
		}
	}
	return 0
}
