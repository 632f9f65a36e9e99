package handlers

import (
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// ProvisionInput is the validated data of vm.provision (contract §9).
type ProvisionInput struct {
	Source              ProvisionSource `json:"source"`
	NewVMID             int64           `json:"new_vmid"`
	NewName             string          `json:"new_name"`
	TargetNode          string          `json:"target_node"`
	Storage             string          `json:"storage,omitempty"`
	FullClone           bool            `json:"full_clone"`
	MemoryMB            int64           `json:"memory_mb,omitempty"`
	Cores               int64           `json:"cores,omitempty"`
	Sockets             int64           `json:"sockets,omitempty"`
	DiskGB              int64           `json:"disk_gb,omitempty"`
	Bridge              string          `json:"bridge,omitempty"`
	VLANTag             int64           `json:"vlan_tag,omitempty"`
	CloudInit           *CloudInit      `json:"cloud_init,omitempty"`
	ExtraNetworks       []ExtraNetwork  `json:"extra_networks,omitempty"`
	EnforceCloudNetwork bool            `json:"enforce_cloud_network"`
	EnableAgent         bool            `json:"enable_agent"`
	StartAfterProvision bool            `json:"start_after_provision"`

	template guestLocation // the template's node, set by Locate
}

// guestLocation is where an existing guest lives.
type guestLocation struct {
	VMID int64
	Node string
}

// ProvisionSource is exactly one of a template or a cloud image.
type ProvisionSource struct {
	TemplateVMID int64  `json:"template_vmid,omitempty"`
	Image        *Image `json:"image,omitempty"`
}

// Image is a cloud image to import, verified by its checksum.
type Image struct {
	URL               string `json:"url"`
	Checksum          string `json:"checksum"`
	ChecksumAlgorithm string `json:"checksum_algorithm"`
}

// CloudInit is the guest's Cloud-Init configuration; Password is write-only.
type CloudInit struct {
	User         string `json:"user,omitempty"`
	Password     string `json:"password,omitempty"`
	SSHKeys      string `json:"ssh_keys,omitempty"`
	IPConfig0    string `json:"ipconfig0,omitempty"`
	Nameserver   string `json:"nameserver,omitempty"`
	Searchdomain string `json:"searchdomain,omitempty"`
}

// ExtraNetwork is one more NIC, rendered into net<Index>.
type ExtraNetwork struct {
	Index    int64  `json:"index"`
	Bridge   string `json:"bridge"`
	VLANTag  int64  `json:"vlan_tag,omitempty"`
	Model    string `json:"model"`
	Firewall bool   `json:"firewall,omitempty"`
}

var (
	bridgePattern     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,14}$`)
	checksumPattern   = regexp.MustCompile(`^[0-9A-Fa-f]{32,128}$`)
	ciUserPattern     = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	ipConfigPattern   = regexp.MustCompile(`^(ip|gw|ip6|gw6)=[^,=\s]+(,(ip|gw|ip6|gw6)=[^,=\s]+)*$`)
	checksumLengths   = map[string]int{"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128}
	maxExtraNetworks  = 8
	defaultNICModel   = "virtio"
	provisionNICModel = func(m string) bool { return slices.Contains(proxmox.NICModels(), m) }
)

func decodeProvision(f *Fields) ProvisionInput {
	in := ProvisionInput{
		NewVMID:             f.Int("new_vmid", true, 0, 100, 999999999),
		NewName:             f.String("new_name", true, validDNSName),
		TargetNode:          f.String("target_node", true, nodeNamePattern.MatchString),
		Storage:             f.String("storage", false, storageIDPattern.MatchString),
		FullClone:           f.Bool("full_clone", true),
		MemoryMB:            f.Int("memory_mb", false, 0, 16, 4194304),
		Cores:               f.Int("cores", false, 0, 1, 1024),
		Sockets:             f.Int("sockets", false, 0, 1, 16),
		DiskGB:              f.Int("disk_gb", false, 0, 1, 131072),
		Bridge:              f.String("bridge", false, bridgePattern.MatchString),
		VLANTag:             f.Int("vlan_tag", false, 0, 1, 4094),
		EnforceCloudNetwork: f.Bool("enforce_cloud_network", false),
		EnableAgent:         f.Bool("enable_agent", true),
		StartAfterProvision: f.Bool("start_after_provision", true),
	}
	f.Object("source", true, func(s *Fields) {
		hasTemplate, hasImage := s.Has("template_vmid"), s.Has("image")
		if hasTemplate == hasImage { // exactly one
			s.Fail("source")
			return
		}
		if hasTemplate {
			in.Source.TemplateVMID = s.Int("template_vmid", true, 0, 100, 999999999)
			return
		}
		s.Object("image", true, func(img *Fields) {
			image := Image{
				URL:               img.String("url", true, validImageURL),
				Checksum:          strings.ToLower(img.String("checksum", true, checksumPattern.MatchString)),
				ChecksumAlgorithm: strings.ToLower(img.String("checksum_algorithm", false, nil)),
			}
			if image.ChecksumAlgorithm == "" {
				image.ChecksumAlgorithm = "sha256"
			}
			if n, ok := checksumLengths[image.ChecksumAlgorithm]; !ok || len(image.Checksum) != n {
				img.Fail("checksum")
			}
			in.Source.Image = &image
		})
	})
	f.Object("cloud_init", false, func(c *Fields) {
		ci := CloudInit{
			User:         c.String("user", false, ciUserPattern.MatchString),
			Password:     c.String("password", false, func(s string) bool { return s != "" && len(s) <= 256 }),
			IPConfig0:    c.String("ipconfig0", false, ipConfigPattern.MatchString),
			Nameserver:   c.String("nameserver", false, validNameservers),
			Searchdomain: c.String("searchdomain", false, validDNSName),
		}
		ci.SSHKeys = decodeSSHKeys(c)
		in.CloudInit = &ci
	})
	seen := map[int64]bool{}
	f.Objects("extra_networks", maxExtraNetworks, func(_ int, n *Fields) {
		nic := ExtraNetwork{
			Index:    n.Int("index", true, 0, 1, 31),
			Bridge:   n.String("bridge", true, bridgePattern.MatchString),
			VLANTag:  n.Int("vlan_tag", false, 0, 1, 4094),
			Model:    n.String("model", false, provisionNICModel),
			Firewall: n.Bool("firewall", false),
		}
		if nic.Model == "" {
			nic.Model = defaultNICModel
		}
		if seen[nic.Index] {
			n.Fail("index")
		}
		seen[nic.Index] = true
		in.ExtraNetworks = append(in.ExtraNetworks, nic)
	})
	return in
}

// decodeSSHKeys accepts one string (keys on lines) or a list of keys.
func decodeSSHKeys(c *Fields) string {
	raw := c.Raw("ssh_keys")
	if raw == nil {
		return ""
	}
	valid := func(k string) bool { return k != "" && !strings.ContainsAny(k, "\r") && len(k) <= 16384 }
	if raw[0] == '"' {
		return c.String("ssh_keys", false, valid)
	}
	return strings.Join(c.Strings("ssh_keys", false, 64, func(k string) bool { return valid(k) && !strings.Contains(k, "\n") }), "\n")
}

func validDNSName(s string) bool {
	return len(s) <= 253 && hostnamePattern.MatchString(s) && net.ParseIP(s) == nil
}

func validNameservers(s string) bool {
	for _, ns := range strings.Fields(s) {
		if net.ParseIP(ns) == nil {
			return false
		}
	}
	return strings.TrimSpace(s) != ""
}

func validImageURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil && len(s) <= 2048
}
