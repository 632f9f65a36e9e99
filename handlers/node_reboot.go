package handlers

import (
	"context"

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
			_, err := x.Write(ctx, "reboot_node", "", func(ctx context.Context) (Sent, error) {
				return Sent{}, x.Proxmox.RebootNode(ctx, in.Node)
			})
			if err != nil {
				return Outcome{}, err
			}
			return Outcome{Status: 200, Result: ResultOK, Output: map[string]any{"node": in.Node}}, nil
		},
		// A reboot cannot be confirmed by reading: it is never sent twice (no Confirm).
	}
}
