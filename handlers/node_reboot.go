package handlers

import (
	"context"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/store"
)

// NodeRebootInput is the data of node.reboot.
type NodeRebootInput struct {
	Node string `json:"node"`
}

// NodeReboot reboots a cluster node (POST /nodes/{node}/status command=reboot); it journals on
// the endpoint.
func NodeReboot() Verb {
	return Spec[NodeRebootInput]{
		Name:   "node.reboot",
		Access: Write,
		Decode: func(f *Fields) NodeRebootInput {
			return NodeRebootInput{Node: f.String("node", true, nodeNamePattern.MatchString)}
		},
		Resource:  func(in NodeRebootInput) string { return in.Node },
		Exclusive: func(in NodeRebootInput) (string, string) { return store.KindNode, in.Node },
		Describe:  func(in NodeRebootInput) []Bullet { return []Bullet{{"node", in.Node}} },
		Dispatch: func(ctx context.Context, x *Exec, in NodeRebootInput) (Outcome, error) {
			if x.PriorDispatch() { // a reboot cannot be confirmed by reading: never send it twice
				return unconfirmedWrite(), nil
			}
			if err := x.MarkDispatched(ctx); err != nil {
				return Outcome{}, err
			}
			x.Step(ctx, "reboot_node", events.StepStarted, "", "")
			if err := x.Proxmox.RebootNode(ctx, in.Node); err != nil {
				x.Step(ctx, "reboot_node", events.StepError, "", "")
				return Outcome{}, err
			}
			x.Step(ctx, "reboot_node", events.StepDone, "", "")
			return Outcome{Status: 200, Result: ResultOK, Output: map[string]any{"node": in.Node}}, nil
		},
	}
}
