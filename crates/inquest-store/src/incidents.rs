use inquest_core::{IncidentId, IncidentText, Tenant};
use time::OffsetDateTime;

use tokio_postgres::Row;
use uuid::Uuid;

use crate::{Store, StoreError, rows::get, text};

#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    pub id: IncidentId,
    pub title: String,
    pub description: String,
    pub created_at: OffsetDateTime,
}

/// One page of incidents, newest first.
#[derive(Debug, Clone)]
pub struct IncidentPage {
    pub incidents: Vec<Incident>,
    /// Pass as `before` to get the next page; `None` on the last page.
    pub next: Option<IncidentId>,
}

fn incident_from_row(row: &Row) -> Result<Incident, StoreError> {
    let escaped: bool = get(row, 4)?;
    Ok(Incident {
        id: IncidentId::from_uuid(get(row, 0)?),
        title: text::read(get(row, 1)?, escaped, "incident title")?,
        description: text::read(get(row, 2)?, escaped, "incident description")?,
        created_at: get(row, 3)?,
    })
}

impl Store {
    /// Creates an incident of `tenant`.
    pub async fn create_incident(
        &self,
        tenant: &Tenant,
        input: &IncidentText,
    ) -> Result<Incident, StoreError> {
        let (id, created_at) = self
            .run("create_incident", async |c| {
                let id = IncidentId::new();
                let row = insert_row(&***c, id, tenant, input).await?;
                Ok((id, get(&row, 0)?))
            })
            .await?;
        Ok(Incident {
            id,
            title: input.title().to_owned(),
            description: input.description().to_owned(),
            created_at,
        })
    }

    /// The incident `id` of `tenant`: another tenant's is NotFound, exactly
    /// as an unknown id.
    pub async fn get_incident(
        &self,
        tenant: &Tenant,
        id: IncidentId,
    ) -> Result<Incident, StoreError> {
        let row = self
            .run("get_incident", async |c| {
                Ok(c.query_opt(
                    "SELECT title, description, created_at, escaped FROM incidents \
                     WHERE id = $1 AND tenant = $2",
                    &[id.as_uuid(), &tenant.as_str()],
                )
                .await?)
            })
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "incident",
                id: id.to_string(),
            })?;
        let escaped: bool = get(&row, 3)?;
        Ok(Incident {
            id,
            title: text::read(get(&row, 0)?, escaped, "incident title")?,
            description: text::read(get(&row, 1)?, escaped, "incident description")?,
            created_at: get(&row, 2)?,
        })
    }

    /// `tenant`'s incidents newest first (ids are UUIDv7), `limit` at a
    /// time, starting after the incident `before` (exclusive) when given.
    /// One read of `incidents_by_tenant` (V16), at most `limit + 1` rows.
    pub async fn list_incidents(
        &self,
        tenant: &Tenant,
        before: Option<IncidentId>,
        limit: u32,
    ) -> Result<IncidentPage, StoreError> {
        let before = before.map_or(Uuid::max(), |b| *b.as_uuid());
        let fetch = i64::from(limit) + 1;
        let rows = self
            .run("list_incidents", async |c| {
                Ok(c.query(
                    "SELECT id, title, description, created_at, escaped FROM incidents \
                     WHERE tenant = $3 AND id < $1 ORDER BY id DESC LIMIT $2",
                    &[&before, &fetch, &tenant.as_str()],
                )
                .await?)
            })
            .await?;
        let mut incidents = rows
            .iter()
            .map(incident_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if incidents.len() > limit as usize {
            incidents.truncate(limit as usize);
            incidents.last().map(|i| i.id)
        } else {
            None
        };
        Ok(IncidentPage { incidents, next })
    }
}

/// Inserts an incident of `tenant` in `tx` (an alert group's first
/// notification creates one in its own transaction).
pub(crate) async fn insert_incident(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &Tenant,
    input: &IncidentText,
) -> Result<IncidentId, StoreError> {
    let id = IncidentId::new();
    insert_row(&**tx, id, tenant, input).await?;
    Ok(id)
}

/// The one INSERT of an incident; returns its `created_at`.
async fn insert_row(
    c: &impl tokio_postgres::GenericClient,
    id: IncidentId,
    tenant: &Tenant,
    input: &IncidentText,
) -> Result<Row, StoreError> {
    // Title and description may hold U+0000: stored escaped (crate::text).
    let escaped = text::has_nul(input.title()) || text::has_nul(input.description());
    let title = text::field(input.title(), escaped);
    let description = text::field(input.description(), escaped);
    Ok(c.query_one(
        "INSERT INTO incidents (id, title, description, escaped, tenant) \
         VALUES ($1, $2, $3, $4, $5) RETURNING created_at",
        &[
            id.as_uuid(),
            &&*title,
            &&*description,
            &escaped,
            &tenant.as_str(),
        ],
    )
    .await?)
}
