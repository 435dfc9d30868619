"""The kopf operator: PlacementPolicy status, and admission webhooks for pods, workloads and policies."""
