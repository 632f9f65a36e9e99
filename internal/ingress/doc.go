// Package ingress turns HTTP requests into proxbus commands. It has two fronts, both mounted
// on a caller's http.ServeMux by [Server.Routes], and a third route that publishes nothing
// (POST /webhooks/netbox/endpoints, see [Config.EndpointsChanged]):
//
//   - POST /webhooks/netbox: a NetBox webhook. The X-Hook-Signature header must be the
//     lowercase hex HMAC-SHA512 of the exact body under the shared secret (compared in
//     constant time), or the request is refused with 401 and nothing is published. The body
//     is either a structured-mode CloudEvent (published as it is, after the events decoder
//     accepted it) or a plain NetBox webhook body (NetBox 4.2 to 4.7 shapes), which is mapped
//     to a command by the first matching rule of a [Rules] file. The command id is derived
//     from the webhook (see [WebhookCommandID]), so a webhook NetBox delivers again becomes
//     the same command and is executed once. The answer is 202 with the command id and the
//     subject to follow, or 204 when no rule matched.
//   - POST /proxmox/storage/pbs?endpoint_id={id}: a proxbox-api compatible front for
//     storage.pbs.create. It publishes the command, waits for its result event and answers
//     with the result's HTTP status and the result as the JSON body (504 when no result came
//     in time).
//
// Request bodies are limited to [MaxBodyBytes]; a larger one is refused with 413 without being
// read further. Nothing this package logs or answers contains a body value: error bodies name
// fields, never values, so a PBS password cannot leak through it.
package ingress
