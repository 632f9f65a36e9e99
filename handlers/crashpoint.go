package handlers

// A crash point is a place in the pipeline where a process may die with consequences: every
// persisted change of a command (its claim, its journal entry and terminal update, its
// suspension, its outcome), every Proxmox write (before it leaves and once it is answered)
// and every event published (before and after). Tests stop a command at each one with
// [Pipeline.crashAt] and resume it on a fresh pipeline, checking that nothing is written twice
// and that exactly one true answer is published (crashpoint_test.go).

// The crash points a command passes, by kind; a point's name adds what it is about.
const (
	crashStored        = "stored"    // a persisted change of the command's record in the store
	crashJournaled     = "journaled" // a journal entry written or updated in NetBox
	crashBeforeSend    = "before_send"
	crashAfterSend     = "after_send"
	crashBeforePublish = "before_publish"
	crashAfterPublish  = "after_publish"
)

// crashSignal is the panic a test's crash hook raises to stop a command where it stands: no
// deferred cleanup of the pipeline's own acts on it (Handle returns at once).
type crashSignal struct{ point string }

// reach marks that the command passed the crash point kind (about what); a test's hook may
// stop it there.
func (r *run) reach(kind, what string) {
	if r.p.crashAt != nil {
		r.p.crashAt(kind + " " + what)
	}
}
