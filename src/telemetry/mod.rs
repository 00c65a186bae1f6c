//! Telemetry samplers (NVML, procfs, Prometheus) arrive with the telemetry issue; this core
//! slice records no telemetry and its reports say so rather than show zeros.
