package embedded

import (
	"testing"
)

// TestStartNATSSyncAlways: SyncAlways reaches the server's JetStream configuration, and the
// default keeps the server's periodic sync.
func TestStartNATSSyncAlways(t *testing.T) {
	t.Parallel()
	for _, always := range []bool{false, true} {
		srv, err := StartNATS(NATSOptions{StoreDir: t.TempDir(), SyncAlways: always})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		if got := srv.JetStreamConfig().SyncAlways; got != always {
			t.Errorf("SyncAlways %v: the server has %v", always, got)
		}
	}
}
