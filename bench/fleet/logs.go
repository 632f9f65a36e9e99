package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// finished is one "command finished" line of a replica's log.
type finished struct {
	// delivery is the number of the delivery that answered the command: its deliveries.
	delivery int
	// duration is how long that delivery took, from its start in the pipeline to the outcome
	// stored (its guards, the endpoint slot among them, are held from the claim to that store).
	duration time.Duration
}

// finishedLines reads the "command finished" lines of a replica's JSON log into into, by
// command id.
func finishedLines(path string, into map[string]finished) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("replica log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	marker := []byte(`"msg":"command finished"`)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), marker) {
			continue
		}
		var line struct {
			CommandID string `json:"command_id"`
			Delivery  int    `json:"delivery"`
			Duration  int64  `json:"duration"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("replica log %s: %w", path, err)
		}
		into[line.CommandID] = finished{delivery: line.Delivery, duration: time.Duration(line.Duration)}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("replica log %s: %w", path, err)
	}
	return nil
}
