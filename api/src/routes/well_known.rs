//! `GET /.well-known/jwks.json`: the public keys that verify access tokens (RFC 7517).

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::keys::Jwk;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct JwkSet {
    pub keys: Vec<Jwk>,
}

/// The JSON Web Key Set that verifies access tokens; tokens name their key by `kid`.
#[utoipa::path(get, path = "/.well-known/jwks.json", tag = "auth",
    responses((status = 200, description = "The public keys", body = JwkSet)))]
pub async fn jwks(State(state): State<AppState>) -> Result<Json<JwkSet>, ApiError> {
    let keys = state.keys.jwks().await.map_err(ApiError::internal)?;
    Ok(Json(JwkSet { keys }))
}
