/*
 * uts.h - the host name a process sees: the one of its UTS namespace (a
 * container's, a Kubernetes pod's: the pod's name).
 */
#ifndef RBP_PROC_UTS_H
#define RBP_PROC_UTS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * The host name of pid's UTS namespace into buf.  RBP_ENOFILE when pid
 * shares ours (no host name of its own).  Read by a short-lived thread
 * that enters the namespace (setns: CAP_SYS_ADMIN), else, where that is
 * refused (a hardened service), from the process's own /etc/hostname
 * (the file a container's host name is set from: kubelet writes the
 * pod's name there).  RBP_EPERM when neither can be read.
 */
int rbp_proc_uts_hostname(pid_t pid, char *buf, size_t cap);

#endif
