// Package deadletter is the dead-letter stream's format and its administration. [Build] makes
// the redacted copy of a command the consumer gives up on (a poison message, or a handler's
// [events.DeadLetter]): the original subject, sequence, deliveries, reason and time in
// Proxbus-Dlq-* headers, every secret-named value replaced, the body cut to the server's max
// payload. [List], [Get], [ReplayRecord] and [Purge] are what `proxbus dlq` does with the copies:
// a replay re-injects the copy on its original subject once, however often it is asked for,
// and is recorded beside the letter.
package deadletter
