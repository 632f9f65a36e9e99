// Package docs holds proxbus's documentation: the architecture and operations pages and the
// AsyncAPI 3.0 description of its wire interface, docs/asyncapi.yaml. It has no code; its
// tests check that asyncapi.yaml names exactly the verbs, steps, step statuses, result words,
// reasons, dead-letter reasons, CloudEvents attributes and subjects that the code uses.
package docs
