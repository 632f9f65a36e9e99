package simpve

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
)

// updateStorage is PUT /storage/{storage} (its parameters passed PVE's schema checks), as
// pve-storage's PVE::API2::Storage::Config update does it under the storage.cfg lock: a
// storage that does not exist dies in storage_config (500 "update storage failed: storage 'x'
// does not exist"); the type's sensitive parameters (a PBS password) are taken out first and
// handed to the plugin's on_update_hook, which writes /etc/pve/priv/storage/<id>.pw
// (PVE/Storage/PBSPlugin.pm pbs_set_password); the rest go through SectionConfig's
// check_config for an update (an option the type does not have is "unexpected"; a fixed one,
// such as a PBS storage's server, cannot be changed, but proxbus never sends those), then
// they are merged into the storage's section. PVE never returns the password afterwards.
func (s *Server) updateStorage(c *call) answer {
	id := c.r.PathValue("storage")
	m, found := s.state.storages[id]
	if !found {
		return fail(http.StatusInternalServerError, fmt.Sprintf("update storage failed: storage '%s' does not exist", id))
	}
	typ := m["type"]
	set := map[string]string{}
	for k := range c.params {
		if k == "storage" || (k == "password" && typ == "pbs") {
			continue
		}
		if typ != "pbs" || !contains(pbsOptional, k) {
			return fail(http.StatusInternalServerError, fmt.Sprintf("update storage failed: unexpected property '%s'", k))
		}
		set[k] = c.params.Get(k)
	}
	s.state.setStorageSecret(id, c.params)
	for k, v := range set {
		m[k] = v
	}
	return ok(map[string]any{"storage": id, "type": typ})
}

// deleteStorage is DELETE /storage/{storage} (pve-storage PVE::API2::Storage::Config delete):
// a storage that does not exist → 500 "delete storage failed: storage 'x' does not exist";
// otherwise its section is removed and the plugin's on_delete_hook removes the secrets it
// kept (PBSPlugin: the password, encryption key and master key files). What is on the
// storage — a PBS datastore's backups — stays where it is: a storage registered again under
// the same id finds it.
func (s *Server) deleteStorage(c *call) answer {
	id := c.r.PathValue("storage")
	if _, found := s.state.storages[id]; !found {
		return fail(http.StatusInternalServerError, fmt.Sprintf("delete storage failed: storage '%s' does not exist", id))
	}
	delete(s.state.storages, id)
	delete(s.state.storageSecrets, id)
	return ok(nil)
}

// setStorageSecret keeps the hash of params' password for storage id, when it has one.
func (c *cluster) setStorageSecret(id string, params url.Values) {
	if pw := params.Get("password"); pw != "" {
		sum := sha256.Sum256([]byte(pw))
		c.storageSecrets[id] = hex.EncodeToString(sum[:])
	}
}

// CheckStoragePassword reports whether password is the secret PVE keeps for storage id
// (/etc/pve/priv/storage/<id>.pw): what the API never shows, for tests.
func (s *Server) CheckStoragePassword(id, password string) bool {
	sum := sha256.Sum256([]byte(password))
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.storageSecrets[id] == hex.EncodeToString(sum[:])
}
