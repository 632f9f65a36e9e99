// Package guestconfig parses the configuration of a Proxmox VE guest, a QEMU virtual machine
// or an LXC container, into the typed [Config] that contract §9 vm.config.get outputs.
//
// Its input is the configuration as PVE's config file holds it, one string per key (GET
// /nodes/{node}/{qemu|lxc}/{vmid}/config with numbers in decimal and booleans "0"/"1"). The
// parser follows qemu-server's and pve-container's rules for defaults, property strings, disk
// sizes, boot order and device naming. It never fails on a key it does not understand; a
// malformed value of a key it does understand is an [*Error] naming the key (never quoting
// the value) that matches [ErrMalformed].
//
// It makes no requests: reading the configuration is package proxmox's job.
package guestconfig
