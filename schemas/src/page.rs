//! The list envelope of the contract's Conventions: `{"data": [...], "next_cursor"}`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Opaque; pass as `?cursor=` for the next page. `null` on the last page.
    pub next_cursor: Option<String>,
}
