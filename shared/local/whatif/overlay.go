package whatif

import (
	"fmt"

	"github.com/karpless/karpless/shared/core/overlay"
	"github.com/karpless/karpless/shared/core/scheduling"
)

// applyOverlays applies the snapshot's NodeOverlays to the classes'
// instance types as the provisioner's pass does (cloud.ApplyOverlays), and
// notes what became of each.
func (w *World) applyOverlays() {
	if len(w.snap.NodeOverlays) == 0 {
		return
	}
	in := make(map[string][]*scheduling.InstanceType, len(w.classes))
	for name, c := range w.classes {
		in[name] = c.InstanceTypes
	}
	w.overlays = overlay.Apply(overlay.Input{Classes: in, Pools: w.snap.NodePools, Overlays: w.snap.NodeOverlays})
	w.classes = w.overlays.NodeClasses(w.classes)
	for _, o := range overlay.Order(w.snap.NodeOverlays) {
		out := w.overlays.Overlays[o.Name]
		if out.Applied {
			w.notes = append(w.notes, fmt.Sprintf("NodeOverlay %s: applied to %d instance types", o.Name, out.Types))
			continue
		}
		w.notes = append(w.notes, fmt.Sprintf("NodeOverlay %s: not applied (%s: %s)", o.Name, out.Reason, out.Message))
	}
}
